"""Turning cluster records into containers on the nodes, and back.

Every function here is safe to run twice, or after a worker died half-way: each looks at the
cluster's state and at what exists on the nodes (containers have deterministic names) and does
only what is missing. A per-cluster Postgres advisory lock keeps two workers from working on
one cluster at the same time; it is tied to the worker's database session, so a killed worker
never leaves it held.

Node calls run in threads (one per instance), never touching the database; the calling thread
records what happened.
"""

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, TimeoutError
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from docker.errors import NotFound

from apps.clusters.admission import reserve_or_fail
from apps.clusters.credentials import credentials_of, redact
from apps.clusters.models import Cluster, ClusterEvent, Instance
from apps.clusters.reservation import Rejection, release
from apps.clusters.services import finish_destroy
from apps.clusters.transitions import record_event, transition
from apps.inventory.models import Network, Node
from apps.metrics.recorded import PLACEMENT_SECONDS

from . import containers, drivers
from .containers import ContainerPlan
from .drivers import NodeError

log = logging.getLogger(__name__)
S = Cluster.State
ERROR = ClusterEvent.Level.ERROR
WARNING = ClusterEvent.Level.WARNING
LOCK_NAMESPACE = 7217  # first key of our advisory locks; the second is the cluster id


@contextlib.contextmanager
def cluster_lock(cluster_id: int, wait: float = 0) -> Iterator[bool]:
    """Hold the cluster's advisory lock (waiting up to `wait` seconds); yields whether it
    was obtained."""
    deadline = time.monotonic() + wait
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, cluster_id])
            got = cursor.fetchone()[0]
            if got or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, cluster_id])


@contextlib.contextmanager
def _working_on(cluster_id: int) -> Iterator[None]:
    """The cluster's lock for stop/start/destroy, waiting a while for a worker still on it;
    still busy is a transient error, so the task retries later."""
    with cluster_lock(cluster_id, wait=settings.CLUSTER_LOCK_WAIT) as locked:
        if not locked:
            raise NodeError("-", f"cluster {cluster_id} is busy in another worker", True)
        yield


def parallel(action: Callable, items: list, timeout: float | None = None) -> list:
    """action(item) for every item at once; each result is a value or the exception raised."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(items))) as pool:
        futures = [pool.submit(action, item) for item in items]
        results = []
        for future in futures:
            try:
                results.append(future.result(timeout=timeout))
            except Exception as error:  # noqa: BLE001 (handed back to the caller to sort)
                results.append(error)
        return results


# ------------------------------------------------------------------ one container


def ensure_running(plan: ContainerPlan) -> tuple[str, float]:
    """The instance's container exists as planned and runs; returns (id, seconds taken).
    An existing container with the same fingerprint is reused (a retried task); one made from
    an older plan is replaced."""
    started = time.monotonic()
    api = drivers.client_for(plan.node).api
    node = plan.node
    try:
        info = drivers.call(node, lambda: api.inspect_container(plan.name), "inspect")
    except NotFound:
        info = None
    if info and info["Config"]["Labels"].get("platter.fingerprint") != plan.fingerprint():
        drivers.call(node, lambda: api.remove_container(plan.name, force=True), "replace")
        info = None
    if info is None:
        arguments = containers.create_arguments(api, plan)
        try:
            created = drivers.call(node, lambda: api.create_container(**arguments), "create")
            container_id = created["Id"]
        except NodeError as error:
            if "Conflict" not in error.message and "already in use" not in error.message:
                raise
            container_id = api.inspect_container(plan.name)["Id"]  # an earlier try made it
    else:
        container_id = info["Id"]
        if info["State"]["Running"]:
            return container_id, time.monotonic() - started
    drivers.call(node, lambda: api.start(container_id), f"start {plan.hostname}")
    return container_id, time.monotonic() - started


def remove(node: Node, name: str) -> None:
    api = drivers.client_for(node).api
    with contextlib.suppress(NotFound):
        drivers.call(node, lambda: api.remove_container(name, force=True), f"remove {name}")


def stop_container(node: Node, name: str) -> None:
    api = drivers.client_for(node).api
    with contextlib.suppress(NotFound):
        drivers.call(node, lambda: api.stop(name, timeout=settings.CONTAINER_STOP_TIMEOUT), "stop")


# ------------------------------------------------------------------ launch


@dataclass
class Failure:
    node: Node | None
    message: str
    transient: bool


def launch(cluster_id: int) -> str:
    """Reserve, create and start every container, run the configuration steps: queued or
    placing or configuring → running. Returns the state the cluster is left in."""
    with cluster_lock(cluster_id) as locked:
        if not locked:
            return "busy"  # another worker is on it and will finish the job
        started = time.monotonic()
        for step in range(3 * (settings.SCHEDULER_PLACE_ATTEMPTS + 1)):
            cluster = Cluster.objects.select_related("version").filter(id=cluster_id).first()
            if cluster is None:
                return "gone"
            if cluster.state == S.QUEUED:
                outcome = reserve_or_fail(cluster_id)
                if outcome is None or isinstance(outcome, Rejection):
                    return _placed(started, Cluster.objects.get(id=cluster_id).state)
                disks = sum(len(p.disk_ids) for p in outcome.placements)
                nodes = len({p.node_id for p in outcome.placements})
                record_event(cluster_id, f"reserved {disks} disks on {nodes} nodes")
            elif cluster.state == S.PLACING:
                try:
                    failure = _place(cluster)
                except Exception as error:  # noqa: BLE001 (a bug must not leave disks held)
                    failure = _failure(None, error)
                if failure is not None:
                    _recover(cluster, failure)
                else:
                    transition(cluster_id, S.PLACING, S.CONFIGURING)
            elif cluster.state == S.CONFIGURING:
                try:
                    problem = _configure(cluster)
                except Exception as error:  # noqa: BLE001
                    problem = _failure(None, error).message
                if problem is not None:
                    _abandon(cluster, S.CONFIGURING, problem)
                elif transition(cluster_id, S.CONFIGURING, S.RUNNING):
                    _set_instances(cluster_id, Instance.State.RUNNING)
            else:  # running, or someone asked to stop or destroy it
                # A repeated task that found the launch already done measured nothing.
                return _placed(started, cluster.state) if step else cluster.state
        return _placed(started, Cluster.objects.get(id=cluster_id).state)


def _placed(started: float, state: str) -> str:
    """Record how long a launch that ended running or failed took; returns the state."""
    if state in (S.RUNNING, S.FAILED):
        PLACEMENT_SECONDS.observe(time.monotonic() - started, outcome=state)
    return state


def _place(cluster: Cluster) -> Failure | None:
    """Create and start every container; the first failure found, or None."""
    plans = containers.plans_for(cluster)
    nodes = {p.node.id: p.node for p in plans}
    held = cluster.instances.filter(active=True).values("address__network_id")
    networks = set(Network.objects.filter(id__in=held))
    prepared = parallel(
        lambda node: _prepare_node(
            node, {p.image for p in plans if p.node.id == node.id}, networks
        ),
        list(nodes.values()),
    )
    for node, outcome in zip(nodes.values(), prepared, strict=True):
        if isinstance(outcome, Exception):
            return _failure(node, outcome)
    results = parallel(ensure_running, plans)
    failure = None
    started = {}
    for plan, outcome in zip(plans, results, strict=True):
        if isinstance(outcome, Exception):
            failure = failure or _failure(plan.node, outcome)
            continue
        container_id, seconds = outcome
        started[plan.instance_id] = container_id
        record_event(cluster.id, f"{plan.hostname} started on {plan.node.name} in {seconds:.1f} s")
    for instance_id, container_id in started.items():
        Instance.objects.filter(id=instance_id, active=True).update(container_id=container_id)
    return failure


def _prepare_node(node: Node, images: set[str], networks: set[Network]) -> None:
    """The cluster's network (its segment) and its images exist on the node."""
    client = drivers.client_for(node)
    for network in networks:
        drivers.call(
            node,
            lambda network=network: drivers.ensure_macvlan_network(
                client, network.docker_name, network.subnet, network.gateway,
                network.parent_on(node),
            ),
            "create the cluster network",
        )  # fmt: skip
    for image in sorted(images):
        drivers.ensure_image(node, image)


def _failure(node: Node | None, error: Exception) -> Failure:
    if isinstance(error, NodeError):
        return Failure(node, str(error), error.transient)
    log.error("unexpected error placing a cluster", exc_info=error)
    where = f"node {node.name}: " if node else ""
    return Failure(node, f"{where}{type(error).__name__}: {error}", transient=False)


def _recover(cluster: Cluster, failure: Failure) -> None:
    """A placement failed part-way: remove what was made and give everything back, then
    re-place the cluster away from the failing node or, when that cannot help, fail it."""
    record_event(cluster.id, failure.message, ERROR)
    _remove_all(cluster)
    # A cluster on another's data keeps it: nothing a user owns is lost to a failed launch.
    release(cluster.id, keep_data=cluster.reuse_data_of_id is not None)
    Instance.objects.filter(cluster=cluster).update(container_id="")
    retry = (
        failure.transient
        and failure.node is not None
        and cluster.reuse_data_of_id is None
        and cluster.placement_attempts + 1 < settings.SCHEDULER_PLACE_ATTEMPTS
    )
    if not retry:
        transition(cluster.id, S.PLACING, S.FAILED, _actionable(failure))
        return
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(id=cluster.id)
        locked.avoid_nodes = sorted({*locked.avoid_nodes, failure.node.id})
        locked.placement_attempts += 1
        locked.save(update_fields=["avoid_nodes", "placement_attempts"])
        transition(cluster.id, S.PLACING, S.QUEUED, f"re-placing away from {failure.node.name}")


def _actionable(failure: Failure) -> str:
    if failure.transient:
        return f"{failure.message}; no other node could take the cluster. Try again later."
    return failure.message


def _abandon(cluster: Cluster, state: str, problem: str) -> None:
    """Configuration failed: remove the containers, give everything back, fail with why."""
    _remove_all(cluster)
    release(cluster.id, keep_data=cluster.reuse_data_of_id is not None)
    transition(cluster.id, state, S.FAILED, problem)


def _remove_all(cluster: Cluster) -> list[Failure]:
    """Remove every container of the cluster's placed instances; nodes that do not answer are
    reported (their containers become orphans the reconciler removes once they answer)."""
    instances = list(cluster.instances.exclude(node=None).select_related("node"))
    names = [(i.node, containers.container_name(cluster.id, i.role, i.index)) for i in instances]
    results = parallel(lambda item: remove(*item), names)
    failures = []
    for (node, name), outcome in zip(names, results, strict=True):
        if isinstance(outcome, Exception):
            failures.append(_failure(node, outcome))
            record_event(cluster.id, f"could not remove {name}: {outcome}", WARNING)
    return failures


def _configure(cluster: Cluster) -> str | None:
    """Run the product's post-start steps in order; a message naming the failed step, or
    None. The runs of one step go in parallel."""
    for step in containers.configure_steps(cluster):
        started = time.monotonic()
        results = parallel(lambda run, step=step: _exec(run, step.timeout), step.runs)
        for (instance, _name, _argv), outcome in zip(step.runs, results, strict=True):
            if isinstance(outcome, TimeoutError):
                return f"{step.description}: timed out after {step.timeout} s in {instance}"
            if isinstance(outcome, Exception):
                return f"{step.description}: {instance}: {outcome}"
            code, output = outcome
            if code != 0:
                # Product scripts never print secrets; masked again in case a product does.
                tail = redact(output, credentials_of(cluster)).strip()[-400:]
                return f"{step.description}: {instance} exited with {code}: {tail}"
        seconds = time.monotonic() - started
        record_event(
            cluster.id, f"{step.description} ({len(step.runs)} instances, {seconds:.1f} s)"
        )
    return None


def _exec(run: tuple, timeout: int) -> tuple[int, str]:
    instance, name, argv = run
    return drivers.run_in_container(instance.node, name, argv, timeout)


def _set_instances(cluster_id: int, state: str) -> None:
    Instance.objects.filter(cluster_id=cluster_id, active=True).update(state=state)


# ------------------------------------------------------------------ stop, start, destroy


def stop(cluster_id: int) -> str:
    """stopping → stopped: every container stopped; disks, addresses and nodes stay held."""
    with _working_on(cluster_id):
        cluster = Cluster.objects.get(id=cluster_id)
        if cluster.state != S.STOPPING:
            return cluster.state
        instances = list(cluster.instances.filter(active=True).select_related("node"))
        targets = [
            (i.node, containers.container_name(cluster_id, i.role, i.index)) for i in instances
        ]
        results = parallel(lambda item: stop_container(*item), targets)
        problems = [
            f"{n}: {r}"
            for (_, n), r in zip(targets, results, strict=True)
            if isinstance(r, Exception)
        ]
        if problems:
            transition(cluster_id, S.STOPPING, S.FAILED, "could not stop " + "; ".join(problems))
            return S.FAILED
        _set_instances(cluster_id, Instance.State.STOPPED)
        transition(cluster_id, S.STOPPING, S.STOPPED)
        return S.STOPPED


def start(cluster_id: int) -> str:
    """configuring (asked by request_start) → running: the same containers started again
    (re-created if a node lost them), on the same nodes and disks."""
    with _working_on(cluster_id):
        cluster = Cluster.objects.select_related("version").get(id=cluster_id)
        if cluster.state != S.CONFIGURING:
            return cluster.state
        plans = containers.plans_for(cluster)
        results = parallel(ensure_running, plans)
        for plan, outcome in zip(plans, results, strict=True):
            if isinstance(outcome, Exception):
                message = f"could not start {plan.hostname}: {outcome}"
                transition(cluster_id, S.CONFIGURING, S.FAILED, message)
                return S.FAILED
            Instance.objects.filter(id=plan.instance_id).update(container_id=outcome[0])
        if transition(cluster_id, S.CONFIGURING, S.RUNNING, "started"):
            _set_instances(cluster_id, Instance.State.RUNNING)
        return S.RUNNING


def destroy(cluster_id: int) -> str:
    """destroying → destroyed: containers removed, data wiped if the destroy asked for it,
    everything released. Raises a transient NodeError when a node does not answer (the task
    retries later)."""
    with _working_on(cluster_id):
        cluster = Cluster.objects.get(id=cluster_id)
        if cluster.state != S.DESTROYING:
            return cluster.state
        failures = _remove_all(cluster)
        if failures:
            raise NodeError(failures[0].node.name, failures[0].message, failures[0].transient)
        if cluster.wipe_data:
            _wipe(cluster)
        finish_destroy(cluster_id, keep_data=not cluster.wipe_data)
        return S.DESTROYED


def give_up_destroy(cluster_id: int, error: Exception) -> None:
    """The nodes did not answer through every retry: say so; the user can destroy again."""
    transition(cluster_id, S.DESTROYING, S.FAILED, f"could not remove the containers: {error}")


def _wipe(cluster: Cluster) -> None:
    """Delete the cluster's folder on every disk it holds, one helper container per node."""
    folder = containers.data_folder(cluster)
    site, name = folder.split("/", 1)
    instances = list(cluster.instances.filter(active=True).select_related("node"))
    held = containers.disks_of(instances)
    per_node: dict[int, tuple[Node, list]] = {}
    for instance in instances:
        per_node.setdefault(instance.node_id, (instance.node, []))[1].extend(held[instance.id])
    jobs = list(per_node.values())

    def wipe_node(job: tuple[Node, list]) -> None:
        node, disks = job
        binds = [f"{d.mount_path}/{site}:/wipe/{n}:rw" for n, d in enumerate(disks, start=1)]
        command = ["sh", "-c", f"rm -rf /wipe/*/{name}"]
        # Product containers may leave files owned by other users: the helper needs to
        # override file permissions, and nothing else.
        code, output = drivers.run_helper(node, command, binds, ("DAC_OVERRIDE", "FOWNER"))
        if code != 0:
            raise NodeError(node.name, f"wipe failed: {output.strip()[-300:]}", False)

    for job, outcome in zip(jobs, parallel(wipe_node, jobs), strict=True):
        if isinstance(outcome, Exception):
            raise outcome
        record_event(cluster.id, f"wiped {len(job[1])} disks on {job[0].name}")


# ------------------------------------------------------------------ stalled work


def resume_stalled(older_than: float | None = None) -> list[int]:
    """Hand clusters left mid-way (their task lost, e.g. with a broker restart) back to the
    workers: any cluster in a working state for longer than STALL_SECONDS whose lock nobody
    holds. The tasks are safe to run again, so this can never do a step twice."""
    from django.utils import timezone

    from apps.clusters import jobs

    seconds = settings.STALL_SECONDS if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=seconds)
    stalled = (
        Cluster.objects.filter(state=S.PLACING, placing_at__lt=cutoff)
        | Cluster.objects.filter(state=S.CONFIGURING, configuring_at__lt=cutoff)
        | Cluster.objects.filter(state=S.STOPPING, stopping_at__lt=cutoff)
        | Cluster.objects.filter(state=S.DESTROYING, destroying_at__lt=cutoff)
    )
    resumed = []
    for cluster in stalled.order_by("id"):
        with cluster_lock(cluster.id) as free:
            if not free:
                continue  # a worker is on it
        if cluster.state == S.CONFIGURING and cluster.running_at is not None:
            task = jobs.START  # a restart of a stopped cluster, not a first launch
        else:
            task = {S.PLACING: jobs.LAUNCH, S.CONFIGURING: jobs.LAUNCH, S.STOPPING: jobs.STOP,
                    S.DESTROYING: jobs.DESTROY}[cluster.state]  # fmt: skip
        record_event(cluster.id, f"{cluster.state} for over {seconds:.0f} s: resuming", WARNING)
        jobs.dispatch(task, cluster.id)
        resumed.append(cluster.id)
    return resumed
