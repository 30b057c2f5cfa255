"""The admission queue: clusters within quota but beyond free capacity wait as `queued`."""

from django.conf import settings
from django.db.models import F

from . import jobs
from .models import Cluster
from .reservation import Rejection, Reservation, reserve


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
    for cluster_id in queue_order():
        outcome = reserve(cluster_id)
        if isinstance(outcome, Reservation):
            placed.append(cluster_id)
            jobs.dispatch(jobs.LAUNCH, cluster_id)  # the worker creates its containers
        elif (
            isinstance(outcome, Rejection)
            and outcome.cause in ("capacity", "contention")
            and not settings.SCHEDULER_QUEUE_BACKFILL
        ):
            break
    return placed
