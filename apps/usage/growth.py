"""The growths of a cluster under the group budgets: each front door (page, API, CESGA's API)
calls these instead of apps.clusters.services' own. The clusters service makes the growth and
checks the quota under its locks; then, in the same transaction, budgets.check_growth checks
the owner's groups' budgets under theirs, and a refusal (BudgetExceeded, a QuotaExceeded: HTTP
403) rolls the whole growth back: its state, its instances, its audit row and its task."""

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

from django.db import transaction

from apps.audit.services import Actor
from apps.catalog.options import ClusterSpec
from apps.clusters import services
from apps.clusters.models import Cluster, Instance

from .budgets import check_growth

T = TypeVar("T")


def within_budget(owner_id: int, growth: str, make: Callable[[], T]) -> T:
    """make() and the budget check of its growth, committed together or not at all."""
    with transaction.atomic():
        made = make()
        check_growth(owner_id, growth)
    return made


def _owner(cluster_id: int) -> int:
    return Cluster.objects.values_list("owner_id", flat=True).get(id=cluster_id)


def launch(
    owner,
    version,
    name: str,
    options: dict,
    lease_hours: float | None = None,
    reuse_data_of: Cluster | None = None,
    *,
    actor: Actor = None,
    spec: ClusterSpec | None = None,
    idle_minutes: int | None = None,
    allowed_sources: Iterable[str] = (),
) -> Cluster:
    """services.launch, within the budgets of the owner's groups."""
    return within_budget(
        owner.id,
        "launch",
        lambda: services.launch(
            owner,
            version,
            name,
            options,
            lease_hours,
            reuse_data_of,
            actor=actor,
            spec=spec,
            idle_minutes=idle_minutes,
            allowed_sources=allowed_sources,
        ),
    )


def request_start(cluster_id: int, *, actor: Actor = None) -> str:
    return within_budget(
        _owner(cluster_id), "start", lambda: services.request_start(cluster_id, actor=actor)
    )


def extend_lease(cluster_id: int, hours: float, *, actor: Actor = None) -> datetime:
    return within_budget(
        _owner(cluster_id),
        "extension",
        lambda: services.extend_lease(cluster_id, hours, actor=actor),
    )


def request_notebook(cluster_id: int, *, actor: Actor = None) -> str:
    return within_budget(
        _owner(cluster_id), "notebook", lambda: services.request_notebook(cluster_id, actor=actor)
    )


def request_resize(cluster_id: int, workers: object, *, actor: Actor = None) -> str:
    """A grow within the budgets; a shrink only lowers what the group holds, so it is always
    let through (even past a budget)."""
    with transaction.atomic():
        state = services.request_resize(cluster_id, workers, actor=actor)
        pending = Instance.objects.filter(
            cluster_id=cluster_id, active=False, state=Instance.State.PENDING
        )
        if pending.exists():
            check_growth(_owner(cluster_id), "resize")
    return state


def request_vertical_resize(
    cluster_id: int,
    role: object,
    cores: object = None,
    memory_mb: object = None,
    *,
    actor: Actor = None,
) -> str:
    """New cores or memory for a role's instances; one that adds cores (budgets count core-
    and disk-hours) is checked against the budgets, any other is let through."""
    with transaction.atomic():
        before = _cores_held(cluster_id)
        state = services.request_vertical_resize(cluster_id, role, cores, memory_mb, actor=actor)
        if _cores_held(cluster_id) > before:
            check_growth(_owner(cluster_id), "resize")
    return state


def _cores_held(cluster_id: int) -> int:
    active = Instance.objects.filter(cluster_id=cluster_id, active=True)
    return sum(active.values_list("cores", flat=True))
