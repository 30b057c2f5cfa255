"""The admission queue: clusters within quota but beyond free capacity wait as `queued`."""

import logging

from django.conf import settings
from django.db.models import F

from apps.catalog.images import any_prepared_lately, preparation_failure, waiting_for_images
from apps.catalog.models import ProductVersion
from apps.tasks import bus

from . import backfill, placement
from .models import Cluster
from .reservation import Rejection, Reservation, fail, reserve
from .transitions import record_event

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
    order the first cluster that does not fit (the head) stops the pass, so big clusters never
    starve behind a stream of small ones. With SCHEDULER_QUEUE_BACKFILL a later cluster may
    go ahead of the head only if it cannot delay it (backfill.py)."""
    outcomes = _admission_pass()
    return [cid for cid, outcome in outcomes.items() if isinstance(outcome, Reservation)]


def _admission_pass(caller: int | None = None) -> dict[int, Reservation | Rejection | None]:
    """One pass over the queue: each tried cluster's outcome. The caller's own cluster, when
    placed, gets no launch task: the caller is that launch."""
    outcomes: dict[int, Reservation | Rejection | None] = {}
    try:
        order = queue_order()
    except Exception:  # (it runs after others' commits: never fail their work)
        log.exception("could not read the admission queue")
        return outcomes
    shadow = None  # once a head waits: when it can start at the latest
    for cluster_id in order:
        if shadow is not None and (waits := _may_not_pass(cluster_id, shadow)):
            outcomes[cluster_id] = waits
            continue
        outcome = _reserve_once_more(cluster_id)
        outcomes[cluster_id] = outcome
        if outcome is None:
            continue  # that cluster failed on its own; the rest of the queue goes on
        if isinstance(outcome, Reservation):
            if cluster_id != caller:
                bus.dispatch(bus.LAUNCH, cluster_id)  # the worker creates its containers
        elif (
            shadow is None
            and isinstance(outcome, Rejection)
            and outcome.cause in ("capacity", "contention")
            and not _set_aside(cluster_id, outcome)
        ):
            if not settings.SCHEDULER_QUEUE_BACKFILL:
                break
            shadow = _head_waits(cluster_id, outcome)
    return outcomes


def _reserve_once_more(cluster_id: int) -> Reservation | Rejection | None:
    outcome = _reserve_or_fail(cluster_id)
    if _capacity_short(outcome) and _stop_avoiding(cluster_id):
        outcome = _reserve_or_fail(cluster_id)
    return outcome


def _head_waits(cluster_id: int, rejection: Rejection) -> backfill.Shadow:
    """The head's shadow time, with its reason saying when it can start; unknown (nothing
    goes ahead of it) if working it out fails."""
    try:
        shadow = backfill.shadow_of(cluster_id)
    except Exception:  # a bug here must not stop the queue; nothing backfills
        log.exception("could not work out when cluster %s can start", cluster_id)
        shadow = backfill.Shadow(cluster_id, f"cluster {cluster_id}", None, "not worked out")
    _wait(cluster_id, backfill.head_reason(rejection.message, shadow))
    return shadow


def _may_not_pass(cluster_id: int, shadow: backfill.Shadow) -> Rejection | None:
    """A Rejection (recorded as the cluster's reason) when it could delay the head."""
    cluster = Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED).first()
    if cluster is None:
        return Rejection(cluster_id, "state", "no longer queued")
    reason = backfill.refusal(cluster, shadow)
    if reason is None:
        return None
    _wait(cluster_id, reason)
    return Rejection(cluster_id, "turn", reason)


def _wait(cluster_id: int, reason: str) -> None:
    """Record why a queued cluster waits (an event only when the reason changes)."""
    if (
        Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED)
        .exclude(reason=reason)
        .update(reason=reason)
    ):
        record_event(cluster_id, f"waiting: {reason}")


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
    _wait(cluster_id, reason)
    return True


def reserve_or_fail(cluster_id: int) -> Reservation | Rejection | None:
    """A launch's own reservation (the launch task calls it), in turn: with clusters queued
    ahead of this one the queue is admitted in order instead (strict, or with backfill), so
    a new launch never jumps ahead of a waiting head. Otherwise _reserve_or_fail()."""
    if _queued_ahead(cluster_id):
        outcome = _admission_pass(caller=cluster_id)
        if cluster_id in outcome:
            return outcome[cluster_id]
        if Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED).exists():
            return Rejection(cluster_id, "turn", "waits its turn: clusters ahead of it go first")
        return Rejection(cluster_id, "state", "no longer queued")
    return _reserve_or_fail(cluster_id)


def _definition_if_images_in_question(cluster_id: int) -> ProductVersion | None:
    """The cluster's definition when some image is being prepared or failed to be (its
    image may be one of them), else None: one small query, as nearly always."""
    if not any_prepared_lately():
        return None
    cluster = Cluster.objects.filter(id=cluster_id).select_related("version", "revision").first()
    return cluster.definition if cluster else None


def _queued_ahead(cluster_id: int) -> bool:
    order = queue_order()
    return cluster_id in order and order.index(cluster_id) > 0


def _reserve_or_fail(cluster_id: int) -> Reservation | Rejection | None:
    """reserve(), except that an unexpected error (a bug, a shape the planner mishandles)
    fails this one cluster with the reason, gives back anything it held and returns None,
    instead of stopping the queue or whoever released capacity (a destroy) with it. A cluster
    whose image is still being prepared waits for it, holding no one back (cause "image")."""
    try:
        if definition := _definition_if_images_in_question(cluster_id):
            if failure := preparation_failure(definition):  # no node has it, none will
                fail(cluster_id, Cluster.State.QUEUED, failure)
                return None
            if waiting := waiting_for_images(definition):
                _wait(cluster_id, waiting)
                return Rejection(cluster_id, "image", waiting)
        return reserve(cluster_id)
    except Exception as error:  # any bug: this cluster fails, not the queue
        log.exception("reserving cluster %s failed", cluster_id)
        reason = (
            f"Platter could not place this cluster ({type(error).__name__}: {error}); "
            "nothing is held. Please report it to the administrators."
        )
        try:
            fail(cluster_id, Cluster.State.QUEUED, reason)
        except Exception:  # (the database itself is failing: the next pass retries)
            log.exception("could not fail cluster %s", cluster_id)
        return None
