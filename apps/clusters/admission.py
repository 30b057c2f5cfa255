"""The admission queue: clusters within quota but beyond free capacity wait as `queued`."""

import logging

from django.conf import settings
from django.db.models import F

from . import jobs, placement
from .models import Cluster
from .reservation import Rejection, Reservation, release, reserve
from .transitions import record_event, transition

log = logging.getLogger(__name__)


def queue_order() -> list[int]:
    """Queued cluster ids in the configured order: FIFO, or shortest declared lease first
    (clusters without a lease go last, FIFO among themselves)."""
    queued = Cluster.objects.filter(state=Cluster.State.QUEUED)
    if settings.SCHEDULER_QUEUE_ORDER == "sjf":
        queued = queued.annotate(lease=F("expires_at") - F("created")).order_by(
            F("lease").asc(nulls_last=True), "created", "id"
        )
    elif settings.SCHEDULER_QUEUE_ORDER == "fifo":
        queued = queued.order_by("created", "id")
    else:
        raise ValueError(
            f"SCHEDULER_QUEUE_ORDER={settings.SCHEDULER_QUEUE_ORDER!r}: use fifo or sjf"
        )
    return list(queued.values_list("id", flat=True))


def admit_queued() -> list[int]:
    """Try to reserve queued clusters in queue order; returns the ids now placed. In strict
    order the first cluster that does not fit stops the pass, so big clusters never starve
    behind a stream of small ones; with SCHEDULER_QUEUE_BACKFILL the rest are tried too."""
    placed = []
    try:
        order = queue_order()
    except Exception:  # (it runs after others' commits: never fail their work)
        log.exception("could not read the admission queue")
        return placed
    for cluster_id in order:
        outcome = reserve_or_fail(cluster_id)
        if _capacity_short(outcome) and _stop_avoiding(cluster_id):
            outcome = reserve_or_fail(cluster_id)
        if outcome is None:
            continue  # that cluster failed on its own; the rest of the queue goes on
        if isinstance(outcome, Reservation):
            placed.append(cluster_id)
            jobs.dispatch(jobs.LAUNCH, cluster_id)  # the worker creates its containers
        elif (
            isinstance(outcome, Rejection)
            and outcome.cause in ("capacity", "contention")
            and not settings.SCHEDULER_QUEUE_BACKFILL
            and not _set_aside(cluster_id, outcome)
        ):
            break
    return placed


def _capacity_short(outcome: Reservation | Rejection | None) -> bool:
    return isinstance(outcome, Rejection) and outcome.cause == "capacity"


def _stop_avoiding(cluster_id: int) -> bool:
    """A cluster re-queued away from a failing node that no other node can take now may go
    back to it: the node may answer again, and if it does not, the next failure counts
    against SCHEDULER_PLACE_ATTEMPTS, so the cluster fails in the end instead of waiting."""
    queued = Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED)
    return bool(queued.exclude(avoid_nodes=[]).update(avoid_nodes=[]))


def _set_aside(cluster_id: int, rejection: Rejection) -> bool:
    """A queued cluster that could not run on the pool as it is now (a node went away since
    its launch) waits without holding the clusters behind it back; the reason says so."""
    if rejection.cause != "capacity":
        return False
    cluster = Cluster.objects.filter(id=cluster_id, reuse_data_of=None).first()
    problem = cluster and placement.never_fits(list(cluster.instances.all()))
    if not problem:
        return False
    reason = f"could not run on the pool as it is now ({problem}); waits for the pool to change"
    if (
        Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED)
        .exclude(reason=reason)
        .update(reason=reason)
    ):
        record_event(cluster_id, f"waiting: {reason}")
    return True


def reserve_or_fail(cluster_id: int) -> Reservation | Rejection | None:
    """reserve(), except that an unexpected error (a bug, a shape the planner mishandles)
    fails this one cluster with the reason, gives back anything it held and returns None,
    instead of stopping the queue or whoever released capacity (a destroy) with it."""
    try:
        return reserve(cluster_id)
    except Exception as error:  # any bug: this cluster fails, not the queue
        log.exception("reserving cluster %s failed", cluster_id)
        reason = (
            f"Platter could not place this cluster ({type(error).__name__}: {error}); "
            "nothing is held. Please report it to the administrators."
        )
        try:
            release(cluster_id)
            transition(cluster_id, Cluster.State.QUEUED, Cluster.State.FAILED, reason)
        except Exception:  # (the database itself is failing: the next pass retries)
            log.exception("could not fail cluster %s", cluster_id)
        return None
