"""Cluster operations: which operation moves a cluster on from each state, and the one runner
every operation goes through.

The runner holds the cluster's lock while a step of workers/lifecycle.py runs, and is the only
place that decides what a failure means:

- a node that did not answer (a transient NodeError) is retried by the task, a few times;
- a launch whose containers could not start on one node goes back to the queue, away from it;
- anything else, and a transient error past its retries, fails the cluster: an event with the
  reason, its containers removed where the nodes answer, and everything it held (disks,
  addresses, its network segment) given back, with its data kept for a later reuse, except
  what the containers that could not be removed hold: that stays held until the reconciler
  sees them gone (apps.clusters.leftovers). That happens once, under the cluster's row lock,
  and only while the cluster is still in a state the operation works on: a failure that lost a
  race does nothing.

No task and no step handles failure on its own.
"""

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.clusters import states
from apps.clusters.container_specs import UntrustedVersion
from apps.clusters.models import Cluster, ClusterEvent, Instance
from apps.clusters.reservation import fail as fail_cluster
from apps.clusters.reservation import release
from apps.clusters.transitions import record_event, transition
from apps.nodes import NodeError
from apps.tasks import bus
from portal import locks

from . import lifecycle, node_steps, resize
from .lifecycle import PlacementFailed

log = logging.getLogger(__name__)
S = Cluster.State


@dataclass(frozen=True)
class Operation:
    name: str
    task: str  # the Celery task that runs it (apps/tasks/bus.py)
    works_in: tuple[str, ...]  # the states it moves a cluster on from
    step: Callable[[int], str]
    retries: Callable[[], int]  # task retries of a node that does not answer
    retry_seconds: Callable[[], int]  # between those retries
    lock_wait: Callable[[], float]  # seconds to wait for another worker on the cluster
    # When another worker holds the cluster: a launch leaves it the job (that worker takes the
    # cluster through every launch state); the others try again later.
    busy_retries: bool = True


# How each operation of the life cycle (apps.clusters.states.OPERATIONS: the states it works
# in) runs here. A user's request (apps.clusters.services) or the admission queue puts a
# cluster in one of the working states; the operation for that state takes it on. running,
# degraded, stopped, failed and destroyed wait for a user, a lease or the reconciler.
OPERATIONS: dict[str, Operation] = {
    "launch": Operation(
        "launch",
        bus.LAUNCH,
        states.OPERATIONS["launch"].through,
        lifecycle.launch,
        retries=lambda: 0,
        retry_seconds=lambda: 0,
        lock_wait=lambda: 0,
        busy_retries=False,
    ),
    "start": Operation(
        "start",
        bus.START,
        states.OPERATIONS["start"].through,
        lifecycle.start,
        retries=lambda: settings.CLUSTER_TASK_RETRIES,
        retry_seconds=lambda: 5,
        lock_wait=lambda: settings.CLUSTER_LOCK_WAIT,
    ),
    "stop": Operation(
        "stop",
        bus.STOP,
        states.OPERATIONS["stop"].through,
        lifecycle.stop,
        retries=lambda: settings.CLUSTER_TASK_RETRIES,
        retry_seconds=lambda: 5,
        lock_wait=lambda: settings.CLUSTER_LOCK_WAIT,
    ),
    "resize": Operation(
        "resize",
        bus.RESIZE,
        states.OPERATIONS["resize"].through,
        resize.resize,
        retries=lambda: settings.CLUSTER_TASK_RETRIES,
        retry_seconds=lambda: 5,
        lock_wait=lambda: settings.CLUSTER_LOCK_WAIT,
    ),
    "destroy": Operation(
        "destroy",
        bus.DESTROY,
        states.OPERATIONS["destroy"].through,
        lifecycle.destroy,
        retries=lambda: settings.DESTROY_RETRIES,
        retry_seconds=lambda: settings.DESTROY_RETRY_SECONDS,
        lock_wait=lambda: settings.CLUSTER_LOCK_WAIT,
    ),
}
# Which operation takes a cluster on in each working state (configuring: a first launch, or
# the start of a stopped cluster, told apart by running_at).
BY_STATE: dict[str, str] = states.worked_by()


class Retry(Exception):
    """A transient failure with retries left: the task runs the operation again later."""

    def __init__(self, error: Exception, countdown: int) -> None:
        super().__init__(str(error))
        self.error, self.countdown = error, countdown


def cluster_lock(cluster_id: int, wait: float = 0) -> AbstractContextManager[bool]:
    """Hold the cluster's advisory lock (waiting up to `wait` seconds); yields whether it was
    obtained. It is tied to the worker's database session, so a killed worker never leaves it
    held."""
    return locks.advisory_lock(locks.CLUSTER, cluster_id, wait)


def run(name: str, cluster_id: int, attempt: int = 0) -> str:
    """Run one operation on a cluster; returns the state it is left in. Raises Retry when a
    node did not answer and the operation has retries left (the task retries later)."""
    operation = OPERATIONS[name]
    with cluster_lock(cluster_id, wait=operation.lock_wait()) as locked:
        if not locked:
            if not operation.busy_retries:
                return "busy"
            busy = NodeError("-", f"cluster {cluster_id} is busy in another worker", True)
            raise Retry(busy, countdown=5)
        try:
            return operation.step(cluster_id)
        except Exception as error:  # noqa: BLE001 (every failure is decided here, and only here)
            return _failed(operation, cluster_id, error, attempt)


def _failed(operation: Operation, cluster_id: int, error: Exception, attempt: int) -> str:
    if isinstance(error, NodeError) and error.transient and attempt < operation.retries():
        log.warning("cluster %s: %s: %s; retrying", cluster_id, operation.name, error)
        raise Retry(error, countdown=operation.retry_seconds())
    if isinstance(error, PlacementFailed) and requeue(cluster_id, error):
        return S.QUEUED
    if not isinstance(error, (NodeError, node_steps.StepFailed, TimeoutError)):
        log.error("cluster %s: %s failed", cluster_id, operation.name, exc_info=error)
    fail(cluster_id, operation.works_in, reason(operation, error))
    return Cluster.objects.get(id=cluster_id).state


def reason(operation: Operation, error: Exception) -> str:
    """What went wrong, in words a user understands."""
    if isinstance(error, PlacementFailed) and error.transient:
        return f"{error}; no other node could take the cluster. Try again later."
    if isinstance(error, (NodeError, node_steps.StepFailed, TimeoutError, UntrustedVersion)):
        return str(error)
    # A bug: its exception is in the worker's log (_failed); users get words, not a class name.
    return (
        f"Platter could not {operation.name} this cluster because of an unexpected error, "
        "logged for the administrators. Please report it to them."
    )


def fail(cluster_id: int, sources: tuple[str, ...] | str, why: str) -> bool:
    """The cluster fails with `why`: its containers removed where the nodes answer, everything
    it held given back with its data kept, except what the containers that could not be
    removed hold (the reconciler removes them, then gives that back). Exactly once: False, and
    nothing done, when the cluster already left `sources`."""
    sources = (sources,) if isinstance(sources, str) else tuple(sources)
    cluster = Cluster.objects.filter(id=cluster_id, state__in=sources).first()
    if cluster is None:
        return False
    unconfirmed = lifecycle.remove_all(cluster)
    if unconfirmed:
        why = f"{why}\n{still_held(cluster_id, unconfirmed)}"
    return fail_cluster(cluster_id, sources, why, unconfirmed=unconfirmed)


def still_held(cluster_id: int, unconfirmed: dict[int, str]) -> str:
    """What a user reads about containers that could not be removed."""
    silent = Instance.objects.filter(id__in=unconfirmed).values_list("node__name", flat=True)
    where = ", ".join(sorted(set(silent)))
    return (
        f"{len(unconfirmed)} of its containers could not be removed ({where} did not answer): "
        "their addresses, disks and network stay reserved, for nobody else, until Platter "
        "sees them gone once the node answers; then it gives them back by itself."
    )


def requeue(cluster_id: int, failure: PlacementFailed) -> bool:
    """A placement that failed on one node goes back to the queue away from it, with
    everything given back, while attempts are left and another node may help. False when the
    cluster should fail instead."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        retry = (
            cluster.state == S.PLACING
            and failure.transient
            and failure.node is not None
            and cluster.reuse_data_of_id is None  # its data is on those nodes only
            and cluster.placement_attempts + 1 < settings.SCHEDULER_PLACE_ATTEMPTS
        )
        if not retry or failure.node is None:  # (the node is part of `retry`)
            return False
        node = failure.node
    record_event(cluster_id, str(failure), ClusterEvent.Level.ERROR)
    unconfirmed = lifecycle.remove_all(cluster)
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        if cluster.state != S.PLACING:
            return True  # a destroy came first; it releases
        # A first launch wrote nothing worth keeping; what containers that could not be
        # removed hold stays held until they are seen gone (new ones are reserved instead).
        release(cluster_id, keep_data=False, unconfirmed=unconfirmed)
        Instance.objects.filter(cluster_id=cluster_id).update(container_id="")
        cluster.avoid_nodes = sorted({*cluster.avoid_nodes, node.id})
        cluster.placement_attempts += 1
        cluster.save(update_fields=["avoid_nodes", "placement_attempts"])
        transition(cluster_id, S.PLACING, S.QUEUED, f"re-placing away from {node.name}")
    return True


def resume_stalled(older_than: float | None = None) -> list[int]:
    """Hand clusters left mid-way (their task lost, e.g. with a broker restart) back to the
    workers: any cluster in a working state for longer than STALL_SECONDS whose lock nobody
    holds. The operations are safe to run again, so this can never do a step twice."""
    seconds = settings.STALL_SECONDS if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=seconds)
    since = Q()  # in a working state, entered (its `<state>_at` stamp) before the cutoff
    for state in BY_STATE:
        since |= Q(state=state, **{f"{state}_at__lt": cutoff})
    stalled = Cluster.objects.filter(since)
    resumed = []
    for cluster in stalled.order_by("id"):
        with cluster_lock(cluster.id) as free:
            if not free:
                continue  # a worker is on it
        name = BY_STATE[cluster.state]
        if cluster.state == S.CONFIGURING and cluster.running_at is not None:
            name = "start"  # a restart of a stopped cluster, not a first launch
        record_event(
            cluster.id,
            f"{cluster.state} for over {seconds:.0f} s: resuming",
            ClusterEvent.Level.WARNING,
        )
        bus.dispatch(OPERATIONS[name].task, cluster.id)
        resumed.append(cluster.id)
    return resumed
