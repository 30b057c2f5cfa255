"""Cluster names: one owner's clusters that are not destroyed have distinct names (the
constraint `cluster_unique_name_per_owner`; a destroyed cluster frees its name, a failed one
still shows in its owner's list so it keeps it)."""

from django.db import IntegrityError

from .models import Cluster

MAX_LENGTH = 63
CONSTRAINT = "cluster_unique_name_per_owner"


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


def default_name(owner, version) -> str:
    """What a launch without a name is called: the product's name numbered after the owner's
    clusters of that product (destroyed ones count, so numbers are not reused at once), moved
    on to the next free number."""
    product = version.product
    count = Cluster.objects.filter(owner=owner, version__product=product.id).count()
    return free_name(owner.id, product.name, count + 1)
