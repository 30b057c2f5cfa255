"""The steps of each cluster operation: turning cluster records into containers on the nodes,
and back.

Every step is safe to run twice, or after a worker died half-way: each looks at the cluster's
state and at what exists on the nodes (containers have deterministic names) and does only what
is missing. A step that cannot finish raises; what a failure means for the cluster (retry, back
to the queue, or failed with everything released) is decided in one place,
workers/operations.py, which also holds the cluster's lock while a step runs.

Node calls run in threads (one per instance), never touching the database; the calling thread
records what happened.
"""

import logging
import threading
import time

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from apps import nodes
from apps.clusters import container_specs, leftovers
from apps.clusters import perimeter as perimeter_rules
from apps.clusters.admission import reserve_or_fail
from apps.clusters.credentials import credentials_of, redact
from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation, Instance, Leftover
from apps.clusters.reservation import Rejection
from apps.clusters.services import finish_destroy
from apps.clusters.transitions import record_event, transition
from apps.inventory.models import Network, Node
from apps.metrics.recorded import PLACEMENT_SECONDS
from apps.nodes import NodeError, NodeMissing, parallel

from . import node_steps, perimeter

log = logging.getLogger(__name__)
S = Cluster.State
WARNING = ClusterEvent.Level.WARNING


StepFailed = node_steps.StepFailed  # a step cannot finish (the reason a user reads)


class PlacementFailed(StepFailed):
    """Creating or starting the containers failed on `node`; `transient` failures may go away
    on another node (operations.py re-queues the cluster away from it)."""

    def __init__(self, message: str, node: Node | None, transient: bool) -> None:
        super().__init__(message)
        self.node, self.transient = node, transient


# ------------------------------------------------------------------ launch


def launch(cluster_id: int) -> str:
    """Reserve, create and start every container, run the configuration steps: queued or
    placing or configuring → running. Returns the state the cluster is left in."""
    started = time.monotonic()
    for step in range(4):
        cluster = (
            Cluster.objects.select_related("version__product", "revision")
            .filter(id=cluster_id)
            .first()
        )
        if cluster is None:
            return "gone"
        if cluster.state == S.QUEUED:
            if step:  # re-queued by a failed placement: the admission pass places it
                return cluster.state
            outcome = reserve_or_fail(cluster_id)
            if outcome is None or isinstance(outcome, Rejection):
                return _placed(started, Cluster.objects.get(id=cluster_id).state)
            disks = sum(len(p.disk_ids) for p in outcome.placements)
            on = len({p.node_id for p in outcome.placements})
            record_event(cluster_id, f"reserved {disks} disks on {on} nodes")
        elif cluster.state == S.PLACING:
            place(cluster)
            transition(cluster_id, S.PLACING, S.CONFIGURING)
        elif cluster.state == S.CONFIGURING:
            configure(cluster)
            if transition(cluster_id, S.CONFIGURING, S.RUNNING):
                set_instances(cluster_id, Instance.State.RUNNING)
        else:  # running, or someone asked to stop or destroy it
            # A repeated task that found the launch already done measured nothing.
            return _placed(started, cluster.state) if step else cluster.state
    return _placed(started, Cluster.objects.get(id=cluster_id).state)


def _placed(started: float, state: str) -> str:
    """Record how long a launch that ended running or failed took; returns the state."""
    if state in (S.RUNNING, S.FAILED):
        PLACEMENT_SECONDS.observe(time.monotonic() - started, outcome=state)
    return state


def place(cluster: Cluster) -> None:
    """Create and start every container; raises PlacementFailed naming the first failure.

    A node normally has the cluster's network (segments stay on the nodes once made) and its
    image already, so the containers are created right away, as a plain `docker run` would;
    a node whose create answers that either is missing gets them (node_steps.prepare_node) and the
    create is tried again. Only nodes with disks handed over from another cluster are
    prepared first: that data is wiped before any container of this cluster sees the disks."""
    specs = container_specs.plans_for(cluster)
    on_nodes = {s.node.id: s.node for s in specs}
    guard(cluster.id)
    held = cluster.instances.filter(active=True).values("address__network_id")
    networks = set(Network.objects.filter(id__in=held))
    handed_over = node_steps.kept_by_others(cluster)
    # Read here: the node threads never touch the database.
    folder = container_specs.data_folder(cluster)
    labels = node_steps.wipe_labels(cluster.id)
    preparing = _Preparing(
        lambda node: node_steps.prepare_node(
            node,
            {s.image for s in specs if s.node.id == node.id},
            networks,
            handed_over.get(node.id, []),
            folder,
            labels,
        )
    )
    first = [on_nodes[node_id] for node_id in handed_over if node_id in on_nodes]
    for node, outcome in zip(first, parallel(preparing.node, first), strict=True):
        if isinstance(outcome, Exception):
            raise _placement_failure(node, outcome)
    if handed_over:
        node_steps.forget_kept(handed_over)
    results = parallel(preparing.run, specs)
    failure = None
    started = []
    for spec, outcome in zip(specs, results, strict=True):
        if isinstance(outcome, Exception):
            failure = failure or _placement_failure(spec.node, outcome)
            continue
        started.append((spec, *outcome))
    _record_started(cluster.id, started, done=None if failure else container_limits())
    if failure:
        raise failure


class _Preparing:
    """Prepares each node once, in the node threads of one placement: first use on a node's
    thread, the others of that node wait for it (two creates of one network would make two
    networks of that name)."""

    def __init__(self, prepare) -> None:
        self._prepare = prepare
        self._lock = threading.Lock()
        self._nodes: dict[int, threading.Lock] = {}
        self._done: set[int] = set()

    def node(self, node: Node) -> None:
        with self._lock:
            lock = self._nodes.setdefault(node.id, threading.Lock())
        with lock:
            if node.id not in self._done:
                self._prepare(node)
                self._done.add(node.id)

    def run(self, spec) -> tuple[str, float]:
        """ensure_running, preparing the node first if it lacks the network or the image."""
        client = nodes.client(spec.node)
        try:
            return client.ensure_running(spec)
        except NodeMissing:
            if spec.node.id in self._done:
                raise  # prepared already: what is missing is something else
        self.node(spec.node)
        return client.ensure_running(spec)


def guard(cluster_id: int) -> None:
    """The perimeter's rules on every node of the cluster before any of its containers
    starts (the cluster's new members are in them); a node that cannot take them fails the
    placement there, as a failed create does."""
    targets = perimeter_rules.nodes_of(cluster_id)
    try:
        perimeter.ensure(targets)
    except NodeError as error:
        node = next((n for n in targets if n.name == error.node), None)
        raise _placement_failure(node, error) from error


def _record_started(cluster_id: int, started: list[tuple], done: str | None = None) -> None:
    """The container ids of the started instances ((spec, container id, seconds)) and an
    event for each, then `done` as the last one, in three statements whatever their number."""
    if not started and done is None:
        return
    ids = {spec.instance_id: container_id for spec, container_id, _ in started}
    changed = list(Instance.objects.filter(id__in=ids, active=True).only("id", "container_id"))
    for instance in changed:
        instance.container_id = ids[instance.id]
    if changed:
        Instance.objects.bulk_update(changed, ["container_id"])
    messages = [
        f"{spec.hostname} started on {spec.node.name} in {seconds:.1f} s"
        for spec, _, seconds in started
    ]
    ClusterEvent.objects.bulk_create(
        ClusterEvent(cluster_id=cluster_id, message=message)
        for message in [*messages, *([done] if done else [])]
    )


def container_limits() -> str:
    """What every container of a cluster may use besides its cores, memory and disks. The
    writable-layer limit is enforced by each node's Docker (overlay2 on XFS with project
    quotas, or btrfs quota groups): a node that cannot enforce it refuses to create the
    container, and the placement fails saying so, so a cluster that got here has it."""
    layer = settings.CONTAINER_ROOTFS_LIMIT
    return (
        f"each container runs at most {settings.CONTAINER_PIDS_LIMIT} processes and writes "
        + (
            f"at most {layer} outside its disks (enforced by each node's Docker)"
            if layer
            else "outside its disks without a size limit"
        )
        + f"; a crashed process is restarted up to {settings.CONTAINER_RESTARTS} times"
    )


def _placement_failure(node: Node | None, error: Exception) -> PlacementFailed:
    if isinstance(error, NodeError):
        return PlacementFailed(str(error), node, error.transient)
    if isinstance(error, StepFailed):
        return PlacementFailed(str(error), node, transient=False)
    log.error("unexpected error placing a cluster", exc_info=error)
    where = f"node {node.name}: " if node else ""
    return PlacementFailed(f"{where}{type(error).__name__}: {error}", node, transient=False)


def remove_all(cluster: Cluster) -> dict[int, str]:
    """Remove every container of the cluster's placed instances, and those its earlier
    leftovers left (releasing what they held once removed). Returns, by instance id, why a
    container could not be removed (a node that does not answer), also recorded as an event:
    the caller's release keeps what those instances hold until the reconciler sees them gone
    (apps.clusters.leftovers)."""
    # (node, container name, instance id or None for an earlier leftover's container)
    targets: list[tuple[Node, str, int | None]] = [
        (i.node, container_specs.container_name(cluster.id, i.role, i.index), i.id)
        for i in cluster.instances.exclude(node=None).select_related("node")
        if i.node is not None
    ]
    left = list(Leftover.objects.filter(cluster=cluster, released=None).select_related("node"))
    named = {(node.id, name) for node, name, _ in targets}
    targets += [(x.node, x.container, None) for x in left if (x.node_id, x.container) not in named]
    results = parallel(lambda target: nodes.client(target[0]).remove(target[1]), targets)
    removed, problems = set(), {}
    for (node, name, instance_id), outcome in zip(targets, results, strict=True):
        if isinstance(outcome, Exception):
            detail = outcome.message if isinstance(outcome, NodeError) else str(outcome)
            problem = f"could not remove {name} on {node.name}: {detail}"
            record_event(cluster.id, problem, WARNING)
            if instance_id is not None:
                problems[instance_id] = problem
        else:
            removed.add((node.id, name))
    for leftover in left:
        if (leftover.node_id, leftover.container) in removed:
            leftovers.release(leftover, f"removed from {leftover.node.name}")
    return problems


def configure(cluster: Cluster) -> None:
    """Run the product's post-start steps in order; raises StepFailed naming the failed
    step. The runs of one step go in parallel."""
    for step in container_specs.configure_steps(cluster):
        started = time.monotonic()
        results = parallel(lambda run, step=step: node_steps.exec_run(run, step.timeout), step.runs)
        for (instance, _name, _argv), outcome in zip(step.runs, results, strict=True):
            if isinstance(outcome, TimeoutError):
                raise StepFailed(
                    f"{step.description}: timed out after {step.timeout} s in {instance}"
                )
            if isinstance(outcome, Exception):
                raise StepFailed(f"{step.description}: {instance}: {outcome}")
            code, output = outcome
            if code != 0:
                # Product scripts never print secrets; masked again in case a product does.
                tail = redact(output, credentials_of(cluster)).strip()[-400:]
                raise StepFailed(f"{step.description}: {instance} exited with {code}: {tail}")
        seconds = time.monotonic() - started
        record_event(
            cluster.id, f"{step.description} ({len(step.runs)} instances, {seconds:.1f} s)"
        )


def set_instances(cluster_id: int, state: str) -> None:
    """The state of every active instance; running ones start with no restarts counted."""
    changes: dict = {"state": state}
    if state == Instance.State.RUNNING:
        changes["restarts"] = 0
    Instance.objects.filter(cluster_id=cluster_id, active=True).update(**changes)


# ------------------------------------------------------------------ stop, start, destroy


def stop(cluster_id: int) -> str:
    """stopping → stopped: every container stopped; disks, addresses and nodes stay held."""
    cluster = Cluster.objects.get(id=cluster_id)
    if cluster.state != S.STOPPING:
        return cluster.state
    instances = list(cluster.instances.filter(active=True).select_related("node"))
    targets = [
        (i.node, container_specs.container_name(cluster_id, i.role, i.index)) for i in instances
    ]
    results = parallel(lambda target: nodes.client(target[0]).stop(target[1]), targets)
    for (_node, name), outcome in zip(targets, results, strict=True):
        if isinstance(outcome, Exception):
            raise node_steps.named(outcome, f"could not stop {name}")
    set_instances(cluster_id, Instance.State.STOPPED)
    transition(cluster_id, S.STOPPING, S.STOPPED)
    return S.STOPPED


def start(cluster_id: int) -> str:
    """configuring (asked by request_start) → running: the same containers started again
    (re-created if a node lost them), on the same nodes and disks."""
    cluster = Cluster.objects.select_related("version__product", "revision").get(id=cluster_id)
    if cluster.state != S.CONFIGURING:
        return cluster.state
    specs = container_specs.plans_for(cluster)
    perimeter.ensure(perimeter_rules.nodes_of(cluster_id))
    results = parallel(lambda spec: nodes.client(spec.node).ensure_running(spec), specs)
    for spec, outcome in zip(specs, results, strict=True):
        if isinstance(outcome, Exception):
            raise node_steps.named(outcome, f"could not start {spec.hostname}")
        Instance.objects.filter(id=spec.instance_id).update(container_id=outcome[0])
    if transition(cluster_id, S.CONFIGURING, S.RUNNING, "started"):
        set_instances(cluster_id, Instance.State.RUNNING)
    return S.RUNNING


def destroy(cluster_id: int) -> str:
    """destroying → destroyed: containers removed, data wiped if the destroy asked for it,
    everything released. Raises a NodeError when a node does not answer (the runner retries
    later, then fails the cluster)."""
    cluster = Cluster.objects.get(id=cluster_id)
    if cluster.state != S.DESTROYING:
        return cluster.state
    problems = remove_all(cluster)
    if problems:
        silent = cluster.instances.filter(id__in=problems).values_list("node__name", flat=True)
        raise NodeError(", ".join(sorted(set(silent))), "; ".join(problems.values()), True)
    if cluster.wipe_data:
        wipe(cluster)
    left = perimeter_rules.nodes_of(cluster_id)
    finish_destroy(cluster_id, keep_data=not cluster.wipe_data)
    node_steps.unguard(left)
    return S.DESTROYED


def wipe(cluster: Cluster) -> None:
    """Delete the cluster's folder on every disk that holds its data: the disks it holds now,
    and, for a cluster that failed and gave them back, those that still keep its data (unless
    another cluster took them since). One helper container per node."""
    folder = container_specs.data_folder(cluster)
    site, name = folder.split("/", 1)
    allocations = list(
        DiskAllocation.objects.filter(instance__cluster=cluster)
        .filter(Q(active=True) | Q(data_kept=True))
        .select_related("disk__node")
    )
    by_node: dict[int, tuple[Node, set[str]]] = {}
    for allocation in allocations:
        disk = allocation.disk
        by_node.setdefault(disk.node_id, (disk.node, set()))[1].add(disk.mount_path)
    jobs = [(node, sorted(paths)) for node, paths in by_node.values()]
    labels = node_steps.wipe_labels(cluster.id)

    def wipe_node(job: tuple[Node, list[str]]) -> None:
        node, paths = job
        binds = [f"{path}/{site}:/wipe/{n}:rw" for n, path in enumerate(paths, start=1)]
        command = ["sh", "-c", f"rm -rf /wipe/*/{name}"]
        # Product containers may leave files owned by other users: the helper needs to
        # override file permissions, and nothing else.
        code, output = nodes.client(node).run_helper(
            command, binds, ("DAC_OVERRIDE", "FOWNER"), labels=labels
        )
        if code != 0:
            raise NodeError(node.name, f"wipe failed: {output.strip()[-300:]}")

    for job, outcome in zip(jobs, parallel(wipe_node, jobs), strict=True):
        if isinstance(outcome, Exception):
            raise outcome
        record_event(cluster.id, f"wiped {len(job[1])} disks on {job[0].name}")
    with transaction.atomic():
        DiskAllocation.objects.filter(id__in=[a.id for a in allocations], active=False).update(
            data_kept=False
        )
