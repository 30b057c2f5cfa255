"""Compare-and-swap state changes and the cluster event log."""

import functools
from collections.abc import Iterable
from datetime import datetime

from django.db import connection
from django.dispatch import Signal
from django.utils import timezone

from .models import Cluster, ClusterEvent
from .states import STATES

S = Cluster.State

# Which states each state may move to (the `to` column of states.STATES); anything else is a
# bug in the caller.
ALLOWED: dict[str, set[str]] = {state: set(row.to) for state, row in STATES.items()}

# The compare-and-swap and its event as two CTEs, `moved` and `logged`: transition() runs them
# as one statement, and the reservation folds them into its own write statement.
TRANSITION_CTES = """moved AS (
    UPDATE clusters_cluster SET state = %(to)s, reason = %(reason)s{stamp}
    WHERE id = %(cluster)s AND state = ANY(%(sources)s::text[])
    RETURNING id
), logged AS (
    INSERT INTO clusters_clusterevent (cluster_id, at, level, message, state)
    SELECT id, %(now)s, %(level)s, %(message)s, %(to)s FROM moved
    RETURNING cluster_id
)"""


# Sent after transition() moved a cluster (cluster_id, to, reason), inside the caller's
# transaction: apps above the life cycle hook in here (apps.jobs ends a stopped cluster's jobs).
cluster_moved = Signal()


class TransitionError(ValueError):
    """A transition the state machine does not have."""


def record_event(cluster_id: int, message: str, level: str = ClusterEvent.Level.INFO) -> None:
    ClusterEvent.objects.create(cluster_id=cluster_id, message=message, level=level)


def transition_ctes(
    cluster_id: int,
    expected: str | Iterable[str],
    to: str,
    reason: str = "",
    now: datetime | None = None,
) -> tuple[str, dict]:
    """SQL and parameters of a transition (see TRANSITION_CTES); raises TransitionError for a
    move the state machine does not have."""
    sources = [expected] if isinstance(expected, str) else sorted(set(expected))
    for source in sources:
        if to not in ALLOWED[source]:
            raise TransitionError(f"a cluster cannot go from {source} to {to}")
    level = ClusterEvent.Level.ERROR if to == S.FAILED else ClusterEvent.Level.INFO
    params = {
        "cluster": cluster_id,
        "sources": [str(s) for s in sources],
        "to": str(to),
        "reason": reason,
        "now": now or timezone.now(),
        "level": str(level),
        "message": f"{to}: {reason}" if reason else str(to),
    }
    return _ctes(str(to)), params


@functools.cache
def _ctes(to: str) -> str:
    stamp = "" if to == S.QUEUED else f", {S(to).value}_at = %(now)s"  # a known column name
    return TRANSITION_CTES.format(stamp=stamp)


def transition(cluster_id: int, expected: str | Iterable[str], to: str, reason: str = "") -> bool:
    """Move the cluster to `to` only if it is still in (one of) `expected`; False when another
    worker got there first. Stamps `<to>_at` and logs an event, in one statement."""
    ctes, params = transition_ctes(cluster_id, expected, to, reason)
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {ctes} SELECT COUNT(*) FROM logged", params)  # noqa: S608  (our constants)
        moved = cursor.fetchone()[0] > 0
    if moved:  # apps above (jobs) act on it; the life cycle does not know them
        cluster_moved.send(Cluster, cluster_id=cluster_id, to=str(to), reason=reason)
    return moved
