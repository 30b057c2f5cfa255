"""Cluster names: one owner's clusters that are not destroyed have distinct names (the
constraint `cluster_unique_name_per_owner`; a destroyed cluster frees its name, a failed one
still shows in its owner's list so it keeps it).

A name the owner chose is refused when in use (NameTaken); a name Platter chose for a launch
without one (DefaultName) moves on to the next free number instead, even when a concurrent
launch took it between the choice and the insert."""

from collections.abc import Callable
from typing import TypeVar

from django.db import IntegrityError, transaction

from .models import Cluster

MAX_LENGTH = 63
CONSTRAINT = "cluster_unique_name_per_owner"
# Concurrent launches without a name that each take the next free number: enough for a script
# launching a batch at once; beyond that the launch is refused as any clash.
DEFAULT_ATTEMPTS = 10

T = TypeVar("T")


class NameTaken(ValueError):
    """The owner already has a cluster (not destroyed) of that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"you already have a cluster named {name}")
        self.name = name


def holding_name(owner_id: int):
    """The owner's clusters that hold their names."""
    return Cluster.objects.filter(owner_id=owner_id).exclude(state=Cluster.State.DESTROYED)


def check_free(owner_id: int, name: str) -> None:
    """NameTaken when the owner already uses `name` (the constraint catches a race)."""
    if holding_name(owner_id).filter(name=name).exists():
        raise NameTaken(name)


def is_name_clash(error: IntegrityError) -> bool:
    """Whether the database refused a row for the name constraint (not another one)."""
    diag = getattr(error.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == CONSTRAINT


def numbered(base: str, n: int) -> str:
    suffix = f"-{n}"
    return base[: MAX_LENGTH - len(suffix)] + suffix


def free_name(owner_id: int, base: str, start: int = 1) -> str:
    """The first of base-<start>, base-<start+1>, ... the owner does not use."""
    prefix = base[: MAX_LENGTH - 10]  # numbered() cuts long bases to fit the suffix
    taken = set(
        holding_name(owner_id).filter(name__startswith=prefix).values_list("name", flat=True)
    )
    n = max(start, 1)
    while numbered(base, n) in taken:
        n += 1
    return numbered(base, n)


class DefaultName(str):
    """A name Platter chose, base-number: on a clash the next free number is taken."""

    base: str
    number: int

    def __new__(cls, owner_id: int, base: str, start: int) -> "DefaultName":
        name = free_name(owner_id, base, start)
        made = super().__new__(cls, name)
        made.base, made.number = base, int(name.rsplit("-", 1)[1])
        return made

    def after(self, owner_id: int) -> "DefaultName":
        return DefaultName(owner_id, self.base, self.number + 1)


def default_name(owner, version) -> DefaultName:
    """What a launch without a name is called: the product's name numbered after the owner's
    clusters of that product (destroyed ones count, so numbers are not reused at once), moved
    on to the next free number."""
    product = version.product
    count = Cluster.objects.filter(owner=owner, version__product=product.id).count()
    return DefaultName(owner.id, product.name, count + 1)


def create_named(owner_id: int, name: str, create: Callable[[str], T]) -> T:
    """create(name) in a savepoint. NameTaken when the owner uses the name, before the insert
    or (a concurrent launch's commit) at it; a DefaultName moves on to the next free one."""
    for _ in range(DEFAULT_ATTEMPTS):
        if isinstance(name, DefaultName) and holding_name(owner_id).filter(name=name).exists():
            name = name.after(owner_id)
        check_free(owner_id, name)
        try:
            with transaction.atomic():
                return create(str(name))
        except IntegrityError as exc:
            if not is_name_clash(exc):
                raise
            if not isinstance(name, DefaultName):
                raise NameTaken(name) from None
    raise NameTaken(name)
