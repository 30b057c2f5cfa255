"""Idle stop: a running cluster that nothing has used for its idle limit is stopped (its data
kept, never destroyed), after a warning event some minutes before.

"Used" is whatever a signal reports (workers/idle.py probes them; the UI proxy and the jobs
record theirs as they happen): a portal job, a Spark or YARN application, a request through
the UI proxy, an ssh session or a client connection from outside the cluster. Each report
moves ``active_at`` forward and names the signal, which the cluster page shows. The clock
starts when the cluster last started running; "keep running" resets it.

The rules here are plain functions of the row and a time; the periodic task applies them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from .models import Cluster, IdlePolicy

S = Cluster.State
UNREAD = object()
MIN_LIMIT_MINUTES = 1
MAX_LIMIT_MINUTES = 30 * 24 * 60


class IdleLimitError(ValueError):
    """An idle limit outside the allowed range; the message names it."""


@dataclass(frozen=True)
class Verdict:
    action: str  # "keep", "warn" or "stop"
    limit: timedelta | None
    idle_for: timedelta
    stops_at: datetime | None


def check_limit(minutes: int | None) -> int | None:
    """None (no limit of its own) or whole minutes within range; else IdleLimitError."""
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, int):
        raise IdleLimitError(f"idle limit must be whole minutes, got {minutes!r}")
    if not MIN_LIMIT_MINUTES <= minutes <= MAX_LIMIT_MINUTES:
        raise IdleLimitError(
            f"idle limit must be between {MIN_LIMIT_MINUTES} and {MAX_LIMIT_MINUTES} minutes, "
            f"got {minutes}"
        )
    return minutes


def group_default(owner_id: int) -> int | None:
    """The smallest idle limit of the owner's groups' policies, or None."""
    limits = IdlePolicy.objects.filter(group__user=owner_id).values_list(
        "idle_limit_minutes", flat=True
    )
    return min(limits, default=None)


def with_group_limits(clusters: QuerySet[Cluster]) -> QuerySet[Cluster]:
    """Clusters annotated with their owner's group default (``group_idle_limit``), so pages
    and the API read idle status without a query per cluster."""
    smallest = IdlePolicy.objects.filter(group__user=OuterRef("owner")).order_by(
        "idle_limit_minutes"
    )
    return clusters.annotate(group_idle_limit=Subquery(smallest.values("idle_limit_minutes")[:1]))


def limit_of(cluster: Cluster) -> timedelta | None:
    minutes = cluster.idle_limit_minutes
    if minutes is None:
        annotated = getattr(cluster, "group_idle_limit", UNREAD)  # with_group_limits()
        minutes = group_default(cluster.owner_id) if annotated is UNREAD else annotated  # type: ignore[assignment]  # the annotation is an int or None
    return timedelta(minutes=minutes) if minutes else None


def warning_lead(limit: timedelta) -> timedelta:
    """How long before the stop the owner is warned: IDLE_WARN_MINUTES, or a fifth of a short
    limit."""
    return min(timedelta(minutes=settings.IDLE_WARN_MINUTES), limit / 5)


def last_use(cluster: Cluster) -> datetime:
    started = cluster.running_at or cluster.created
    return max(started, cluster.active_at) if cluster.active_at else started


def verdict(cluster: Cluster, now: datetime, limit: timedelta | None = None) -> Verdict:
    limit = (limit or limit_of(cluster)) if cluster.state == S.RUNNING else None
    idle_for = now - last_use(cluster)
    if limit is None:
        return Verdict("keep", None, idle_for, None)
    stops_at = last_use(cluster) + limit
    if idle_for >= limit:
        return Verdict("stop", limit, idle_for, stops_at)
    if idle_for >= limit - warning_lead(limit) and not _warned_since_last_use(cluster):
        return Verdict("warn", limit, idle_for, stops_at)
    return Verdict("keep", limit, idle_for, stops_at)


def _warned_since_last_use(cluster: Cluster) -> bool:
    return cluster.idle_warned_at is not None and cluster.idle_warned_at >= last_use(cluster)


def record_use(cluster_id: int, signal: str, at: datetime | None = None) -> None:
    """A signal saw the cluster used at ``at`` (now): the idle clock starts again from there."""
    at = at or timezone.now()
    later = Q(active_at__isnull=True) | Q(active_at__lte=at)  # never moves the clock back
    Cluster.objects.filter(later, id=cluster_id).update(active_at=at, active_signal=signal[:120])


# A busy UI makes many requests a second: its use is written at most once a minute.
USE_WRITE_GAP = timedelta(seconds=60)


def record_request(cluster_id: int, what: str) -> None:
    """A request through the UI proxy: use, written only when the last was a while ago."""
    now = timezone.now()
    stale = Q(active_at__isnull=True) | Q(active_at__lt=now - USE_WRITE_GAP)
    Cluster.objects.filter(stale, id=cluster_id, state=S.RUNNING).update(
        active_at=now, active_signal=what[:120]
    )


def set_limit(cluster_id: int, minutes: int | None) -> None:
    Cluster.objects.filter(id=cluster_id).update(idle_limit_minutes=check_limit(minutes))


def keep_running(cluster_id: int) -> None:
    """The owner's "keep running": the idle clock starts again now."""
    record_use(cluster_id, "kept running by its owner")


def status(cluster: Cluster, now: datetime | None = None) -> dict:
    """What the page, the API and the CLI show: the limit (its own or the group's), the last
    use and its signal, when it stops if nothing uses it, and whether the owner was warned."""
    now = now or timezone.now()
    limit = limit_of(cluster)
    judged = verdict(cluster, now, limit)
    return {
        "limit_minutes": cluster.idle_limit_minutes,
        "effective_limit_minutes": int(limit.total_seconds() // 60) if limit else None,
        "from_group": cluster.idle_limit_minutes is None and limit is not None,
        "last_used_at": last_use(cluster) if cluster.running_at else None,
        "last_signal": cluster.active_signal or ("started" if cluster.running_at else ""),
        "stops_at": judged.stops_at,
        "warned": cluster.state == S.RUNNING
        and judged.stops_at is not None
        and _warned_since_last_use(cluster),
    }
