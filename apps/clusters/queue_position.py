"""Where a queued cluster stands in the admission queue, and why it waits.

The position is in the order admission.admit_queued tries clusters (settings
SCHEDULER_QUEUE_ORDER). The reason is the one the last admission pass recorded on the
cluster. In strict order a cluster behind the first one that does not fit is not tried: it
waits its turn. With SCHEDULER_QUEUE_BACKFILL each pass records on every queued cluster why it
waits: the head (the first that does not fit) says when it can start at the latest, and a later
one why it may not go ahead of it (no lease end, a lease ending after that time, or the head's
start time unknown) or, when it may, what it lacks now (backfill.py).
"""

from dataclasses import dataclass

from django.conf import settings

from .admission import queue_order
from .models import Cluster

ORDER_WORDS = {"fifo": "first come, first served", "sjf": "shortest lease first"}


@dataclass(frozen=True)
class QueuePosition:
    position: int  # 1 = the next one the scheduler tries
    length: int
    order: str  # fifo | sjf
    reason: str

    def __str__(self) -> str:
        order = ORDER_WORDS.get(self.order, self.order)
        return f"{self.position} of {self.length} in the queue ({order})"


def position(cluster: Cluster) -> QueuePosition | None:
    """The cluster's place in the queue; None unless it is queued."""
    if cluster.state != Cluster.State.QUEUED:
        return None
    order = queue_order()
    if cluster.id not in order:  # placed or cancelled since it was read
        return None
    place = order.index(cluster.id) + 1
    return QueuePosition(
        place, len(order), settings.SCHEDULER_QUEUE_ORDER, _reason(cluster, ahead=place - 1)
    )


def _reason(cluster: Cluster, ahead: int) -> str:
    if ahead and not settings.SCHEDULER_QUEUE_BACKFILL:
        behind = "1 cluster ahead of it goes" if ahead == 1 else f"{ahead} clusters ahead of it go"
        last = f"; last try: {cluster.reason}" if cluster.reason else ""
        return f"waits its turn: {behind} first{last}"
    if cluster.reason:
        return cluster.reason
    return "not tried yet: the scheduler tries it shortly"
