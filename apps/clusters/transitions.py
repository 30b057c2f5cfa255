"""Compare-and-swap state changes and the cluster event log."""

from collections.abc import Iterable

from django.utils import timezone

from .models import Cluster, ClusterEvent

S = Cluster.State

# Which states each state may move to; anything else is a bug in the caller.
ALLOWED: dict[str, set[str]] = {
    S.QUEUED: {S.PLACING, S.FAILED, S.DESTROYED},
    S.PLACING: {S.CONFIGURING, S.QUEUED, S.FAILED, S.DESTROYING},
    S.CONFIGURING: {S.RUNNING, S.DEGRADED, S.FAILED, S.DESTROYING},
    S.RUNNING: {S.DEGRADED, S.STOPPING, S.DESTROYING, S.FAILED},
    S.DEGRADED: {S.RUNNING, S.STOPPING, S.DESTROYING, S.FAILED},
    S.STOPPING: {S.STOPPED, S.FAILED, S.DESTROYING},
    S.STOPPED: {S.CONFIGURING, S.DESTROYING},
    S.DESTROYING: {S.DESTROYED, S.FAILED},
    S.FAILED: {S.DESTROYING, S.DESTROYED},
    S.DESTROYED: set(),
}


class TransitionError(ValueError):
    """A transition the state machine does not have."""


def record_event(cluster_id: int, message: str, level: str = ClusterEvent.Level.INFO) -> None:
    ClusterEvent.objects.create(cluster_id=cluster_id, message=message, level=level)


def transition(cluster_id: int, expected: str | Iterable[str], to: str, reason: str = "") -> bool:
    """Move the cluster to `to` only if it is still in (one of) `expected`; False when another
    worker got there first. Stamps `<to>_at` and logs an event."""
    sources = {expected} if isinstance(expected, str) else set(expected)
    for source in sources:
        if to not in ALLOWED[source]:
            raise TransitionError(f"a cluster cannot go from {source} to {to}")
    now = timezone.now()
    changes: dict = {"state": to, "reason": reason}
    if to != S.QUEUED:
        changes[f"{to}_at"] = now
    moved = Cluster.objects.filter(id=cluster_id, state__in=sources).update(**changes)
    if moved:
        level = ClusterEvent.Level.ERROR if to == S.FAILED else ClusterEvent.Level.INFO
        record_event(cluster_id, f"{to}: {reason}" if reason else to, level)
    return bool(moved)
