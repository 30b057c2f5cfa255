"""The resize operation's step: resizing → running with Cluster.resize_to instances of the
product's scalable role (apps/clusters/resize.py holds the rules and refuses what it must).
This is the generic core (grow, shrink, release); what a product does on the way (admit,
join, drain) is its plugin's (apps/products/<name>/), handed a NodeOperator below.

Growing: the instances the request added are reserved all or nothing (the launch's
reservation), their containers created on the cluster's network with every member in their
hosts, the older members given the new names (/etc/hosts), then the product's configure steps
run again for the new shape (new DataNodes and NodeManagers live, new Spark workers ALIVE).
Cassandra's new nodes join one at a time instead (its plugin's join): each bootstraps (UJ,
streaming its ranges) and is UN before the next starts; then the older nodes run nodetool cleanup.
Shrinking: the leaving instances are drained by the product first (HDFS decommission, Spark
executors ended, Cassandra's nodetool decommission one node at a time), then stopped, removed
and released, their data kept as a destroy keeps it.

Safe to run again after a worker died half-way: each phase looks at the instances' records
(pending, reserved, running) and at the product's own state. A resize that cannot finish
(no room, a drain past RESIZE_DRAIN_SECONDS) puts back what it changed and ends with the
cluster running as before and the reason as an error event: never a half-removed node. A
Cassandra node that joined or left the ring is not put back (that would stream its data once
more): the cluster runs on at the size reached, which the event says. A node that does not
answer is left to the runner (retried, then the cluster fails)."""

import logging
import shlex
from dataclasses import replace

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps import nodes
from apps.clusters import container_specs as plans
from apps.clusters import notebook, vertical
from apps.clusters import perimeter as perimeter_rules
from apps.clusters import resize as rules
from apps.clusters.credentials import ENV_PASSWORD, ENV_SECRET, ENV_USER, credentials_of, redact
from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation, Instance, ScalingPolicy
from apps.clusters.reservation import Rejection, reserve_added
from apps.clusters.transitions import record_event, transition
from apps.inventory.models import Address, Disk, Network
from apps.nodes import NodeError, parallel
from apps.nodes.specs import ContainerSpec
from apps.products.base import Member, ProductPlugin, ResizeFailed
from apps.products.registry import plugin_for

from . import node_steps, perimeter

log = logging.getLogger(__name__)
S = Cluster.State
I = Instance.State  # noqa: E741
ERROR = ClusterEvent.Level.ERROR
WARNING = ClusterEvent.Level.WARNING


__all__ = ["ResizeFailed", "resize"]


def resize(cluster_id: int) -> str:
    """resizing → running at the asked size, or back to running as it was with the reason."""
    cluster = (
        Cluster.objects.select_related("version__product", "revision").filter(id=cluster_id).first()
    )
    if cluster is None:
        return "gone"
    if cluster.state != S.RESIZING:
        return cluster.state
    if cluster.reshape is not None:
        return _reshape(cluster)
    # A grow adds instances of one role: the scalable one, or the notebook (request_notebook).
    adding = cluster.instances.filter(state__in=(I.PENDING, I.RESERVED)).first()
    role = adding.role if adding is not None else rules.scaling_of(cluster).role
    target = cluster.resize_to
    members = cluster.instances.filter(role=role, active=True)
    before = members.exclude(state__in=(I.PENDING, I.RESERVED)).count()
    added = list(cluster.instances.filter(role=role, state__in=(I.PENDING, I.RESERVED)))
    try:
        if added:
            _grow(cluster, added)
        elif target is not None:
            leaving = rules.leaving(cluster, role, target)
            if leaving:
                _shrink(cluster, leaving)
    except ResizeFailed as failure:
        record_event(cluster_id, f"resize failed: {failure}", ERROR)
        # Cassandra nodes that joined or left before the failure are not put back.
        now = members.count()
        size = "size unchanged" if now == before else f"now {now} {role}s (from {before})"
        _end(cluster_id, f"resize failed, {size}: {failure}")
        return Cluster.objects.get(id=cluster_id).state
    count = cluster.instances.filter(role=role, active=True).count()
    if role == notebook.ROLE:
        # Recorded once it runs: a stop and start, or a relaunch from these options, keep it.
        options = {**cluster.options, notebook.OPTION: True}
        Cluster.objects.filter(id=cluster_id).update(options=options)
        _end(cluster_id, "notebook added")
    else:
        _end(cluster_id, f"resized to {count} {role}s")
    return Cluster.objects.get(id=cluster_id).state


def _end(cluster_id: int, how: str) -> None:
    with transaction.atomic():
        if transition(cluster_id, S.RESIZING, S.RUNNING, how):
            Cluster.objects.filter(id=cluster_id).update(resize_to=None, reshape=None)


# ------------------------------------------------------------------ new cores and memory


def _reshape(cluster: Cluster) -> str:
    """A vertical resize (apps/clusters/vertical.py): the request wrote the new figures to the
    instances and held them; here they reach the containers, live or by a rolling restart.
    When that cannot be done, the old figures are written and applied back the same way and
    the cluster runs on as it was, the reason in its events."""
    record = cluster.reshape
    assert record is not None  # resize() checked it
    role, cores, memory = record["role"], record["cores"], record["memory_mb"]
    try:
        _apply_figures(cluster, record)
    except (ResizeFailed, node_steps.StepFailed, TimeoutError) as failure:
        record_event(cluster.id, f"resize failed: {failure}", ERROR)
        with transaction.atomic():
            Cluster.objects.select_for_update().filter(id=cluster.id).first()
            vertical.set_figures(vertical.figures_before(record))
        _apply_figures(cluster, record)  # each instance back as it was (a no-op where it is)
        _end(cluster.id, f"resize failed, {role}s unchanged: {failure}")
        return Cluster.objects.get(id=cluster.id).state
    _end(cluster.id, f"{role}s now have {cores} cores and {memory} MB")
    return Cluster.objects.get(id=cluster.id).state


def _apply_figures(cluster: Cluster, record: dict) -> None:
    """Each instance's container given its instance's figures: recreated one at a time when
    the change restarts (`rolling`; a container already made from these figures is kept, so a
    resumed change goes on where it stopped), else its limits set live."""
    ids = [int(i) for i in record["before"]]
    instances = list(
        Instance.objects.filter(id__in=ids, active=True).select_related("node").order_by("index")
    )
    if record["rolling"]:
        op = NodeOperator(cluster)
        specs = {s.instance_id: s for s in plans.plans_for(cluster) if s.instance_id in ids}
        for instance in instances:
            spec = specs[instance.id]
            client = nodes.client(spec.node)
            info = client.inspect(spec.name)
            if info and info["Config"]["Labels"].get("platter.fingerprint") == spec.fingerprint():
                continue  # made from these figures already
            container_id, _ = client.ensure_running(spec)
            Instance.objects.filter(id=instance.id).update(container_id=container_id)
            record_event(
                cluster.id,
                f"{instance.hostname} restarted on {spec.node.name} with {instance.cores} cores "
                f"and {instance.memory_mb} MB; waiting for it to be back",
            )
            op.plugin.restarted(op, member_of(instance))
        return
    memory_live = record["memory_mb"] != _figures_of(record)[1]
    results = parallel(
        lambda i: nodes.client(i.node).update_limits(
            plans.container_name(cluster.id, i.role, i.index),
            i.cores,
            i.memory_mb if memory_live else None,
        ),
        instances,
    )
    for instance, outcome in zip(instances, results, strict=True):
        if isinstance(outcome, Exception):
            raise node_steps.named(outcome, f"could not change the limits of {instance}")
    record_event(
        cluster.id,
        f"{len(instances)} {record['role']}s' limits set live: "
        + ", ".join(f"{i.hostname} {i.cores} cores, {i.memory_mb} MB" for i in instances),
    )


def _figures_of(record: dict) -> tuple[int, int]:
    """The first instance's figures before the change (all of a role's are alike)."""
    first = next(iter(record["before"].values()))
    return first[0], first[1]


# ------------------------------------------------------------------ growing


def _grow(cluster: Cluster, added: list[Instance]) -> None:
    unreserved = [i.id for i in added if not i.active]
    if unreserved:
        outcome = reserve_added(cluster.id, unreserved)
        if isinstance(outcome, Rejection):
            Instance.objects.filter(id__in=unreserved, active=False).delete()  # they held nothing
            raise ResizeFailed(outcome.message)
        disks = sum(len(p.disk_ids) for p in outcome.placements)
        record_event(cluster.id, f"reserved {len(unreserved)} instances with {disks} disks")
    try:  # the new members' ports guarded, and their addresses let in, before they start
        perimeter.ensure(perimeter_rules.nodes_of(cluster.id))
    except NodeError as error:
        _remove(cluster, added, keep_data=False)
        raise ResizeFailed(
            f"the new instances' firewall rules could not be set: {error}"
        ) from error
    ids = {i.id for i in added}
    op = NodeOperator(cluster)
    op.plugin.join(op, ids)
    Instance.objects.filter(id__in=ids, active=True).update(state=I.RUNNING, restarts=0)


def join_together(cluster: Cluster, ids: set[int]) -> None:
    """The new instances start at once (after the plugin admitted them) and the product's
    checks run again; when any of it fails they are all removed and given back
    (ResizeFailed)."""
    try:
        op = NodeOperator(cluster)
        added = Instance.objects.filter(id__in=ids).select_related("address")
        op.plugin.admit(op, [member_of(i) for i in added])
        _start(cluster, ids)
        _add_hosts(cluster, ids)
        configure_again(cluster)
    except ResizeFailed:
        _remove(cluster, list(Instance.objects.filter(id__in=ids)), keep_data=False)
        raise
    except (node_steps.StepFailed, TimeoutError) as error:
        _remove(cluster, list(Instance.objects.filter(id__in=ids)), keep_data=False)
        raise ResizeFailed(f"the new instances did not join: {error}") from error


def _start(cluster: Cluster, ids: set[int]) -> None:
    """The added instances' containers, as a launch makes them (images and network on their
    nodes first)."""
    specs = [s for s in plans.plans_for(cluster) if s.instance_id in ids]
    _prepare(cluster, specs)
    results = parallel(lambda spec: nodes.client(spec.node).ensure_running(spec), specs)
    for spec, outcome in zip(specs, results, strict=True):
        if isinstance(outcome, Exception):
            raise node_steps.named(outcome, f"could not start {spec.hostname}")
        Instance.objects.filter(id=spec.instance_id).update(container_id=outcome[0])
        record_event(cluster.id, f"{spec.hostname} started on {spec.node.name}")


def _prepare(cluster: Cluster, specs: list[ContainerSpec]) -> None:
    """The specs' images and the cluster's network on their nodes, and disks handed over
    from another cluster emptied of its data (as a launch prepares its nodes)."""
    ids = {s.instance_id for s in specs}
    held = cluster.instances.filter(id__in=ids).values("address__network_id")
    networks = set(Network.objects.filter(id__in=held))
    on_nodes = {s.node.id: s.node for s in specs}
    labels = node_steps.wipe_labels(cluster.id)
    folder = plans.data_folder(cluster)
    handed_over = node_steps.kept_by_others(cluster)
    prepared = parallel(
        lambda node: node_steps.prepare_node(
            node,
            {s.image for s in specs if s.node.id == node.id},
            networks,
            handed_over.get(node.id, []),
            folder,
            labels,
        ),
        list(on_nodes.values()),
    )
    for outcome in prepared:
        if isinstance(outcome, Exception):
            raise outcome


def _add_hosts(cluster: Cluster, ids: set[int]) -> None:
    """The older members learn the new members' names (their /etc/hosts was written when
    their containers were made)."""
    instances = list(cluster.instances.filter(active=True).select_related("node", "address"))
    lines = [f"{i.address.ip} {i.hostname}" for i in instances if i.id in ids and i.address]
    script = "".join(
        f"grep -q {shlex.quote(' ' + line.split()[1] + '$')} /etc/hosts || "
        f"echo {shlex.quote(line)} >> /etc/hosts; "
        for line in lines
    )
    older = [i for i in instances if i.id not in ids]
    results = parallel(
        lambda i: nodes.client(i.node).exec(
            plans.container_name(cluster.id, i.role, i.index), ["sh", "-c", script], 30
        ),
        older,
    )
    for instance, outcome in zip(older, results, strict=True):
        if isinstance(outcome, Exception):
            raise node_steps.named(outcome, f"could not update the hosts of {instance}")
        if outcome[0] != 0:
            raise node_steps.StepFailed(f"updating the hosts of {instance}: {outcome[1][-200:]}")


def configure_again(cluster: Cluster) -> None:
    """The product's configure steps for the cluster as it is now, in containers whose
    environment still describes it as it was: each run is given the new environment."""
    environment = {s.instance_id: s.environment for s in plans.plans_for(cluster)}
    secrets = credentials_of(cluster)
    for step in plans.configure_steps(cluster):
        runs = [
            (instance, name, ["env", *_template_env(environment[instance.id]), *argv])
            for instance, name, argv in step.runs
        ]
        results = parallel(lambda run, step=step: node_steps.exec_run(run, step.timeout), runs)
        for (instance, _name, _argv), outcome in zip(runs, results, strict=True):
            if isinstance(outcome, Exception):
                raise node_steps.StepFailed(f"{step.description}: {instance}: {outcome}")
            code, output = outcome
            if code != 0:
                tail = redact(output, secrets).strip()[-400:]
                raise node_steps.StepFailed(
                    f"{step.description}: {instance} exited with {code}: {tail}"
                )
        record_event(cluster.id, step.description)


# The container has them already (they do not change); an exec's argv is no place for them.
CREDENTIAL_VARIABLES = {ENV_USER, ENV_PASSWORD, ENV_SECRET}


def _template_env(environment: dict[str, str]) -> list[str]:
    """The product's own PLATTER_* variables (the shape of the cluster); credentials are not
    passed on a command line."""
    return [
        f"{k}={v}"
        for k, v in sorted(environment.items())
        if k.startswith("PLATTER_") and k not in CREDENTIAL_VARIABLES
    ]


# ------------------------------------------------------------------ shrinking


def _shrink(cluster: Cluster, leaving: list[Instance]) -> None:
    """The plugin drains the leaving instances first (the generic one refuses any that keep
    state); a drain may remove some itself (Cassandra: each node once it left the ring)."""
    op = NodeOperator(cluster)
    ids = {i.id for i in leaving}
    op.plugin.drain(op, [m for m in op.members() if m.id in ids])
    _remove(cluster, list(Instance.objects.filter(id__in=ids, active=True)), keep_data=True)


def _remove(cluster: Cluster, instances: list[Instance], keep_data: bool) -> None:
    """Stop and remove the instances' containers, then give back what they hold (their data
    kept as a destroy keeps it, or not)."""
    placed = [i for i in instances if i.node_id is not None]
    results = parallel(
        lambda i: nodes.client(i.node).remove(plans.container_name(cluster.id, i.role, i.index)),
        placed,
    )
    for instance, outcome in zip(placed, results, strict=True):
        if isinstance(outcome, Exception):
            raise node_steps.named(outcome, f"could not remove {instance}")
    left = perimeter_rules.nodes_of(cluster.id)
    release_instances(cluster.id, [i.id for i in instances], keep_data)
    node_steps.unguard(left)


def release_instances(cluster_id: int, ids: list[int], keep_data: bool) -> int:
    """Give back what these instances of the cluster hold (reservation.release for some of
    its instances); returns the number of disks released."""
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(id=cluster_id).first()
        allocations = DiskAllocation.objects.filter(
            instance_id__in=ids, instance__cluster_id=cluster_id, active=True
        )
        disk_ids = list(allocations.values_list("disk_id", flat=True))
        allocations.update(active=False, released=timezone.now(), data_kept=keep_data)
        Disk.objects.filter(id__in=disk_ids, state=Disk.State.ALLOCATED).update(
            state=Disk.State.AVAILABLE
        )
        holders = Instance.objects.filter(id__in=ids, cluster_id=cluster_id, active=True)
        address_ids = list(holders.exclude(address=None).values_list("address_id", flat=True))
        freed = holders.update(active=False, state=I.RELEASED, container_id="")
        Address.objects.filter(id__in=address_ids).update(held=False)
        if freed:
            kept = "kept" if keep_data else "wiped"
            record_event(
                cluster_id,
                f"released {freed} instances and {len(disk_ids)} disks (data {kept})",
            )
    return len(disk_ids)


# ------------------------------------------------------------------ what plugins are handed


def member_of(instance: Instance) -> Member:
    return Member(
        instance.id,
        instance.role,
        instance.index,
        instance.hostname,
        instance.address.ip if instance.address else "",
        plans.container_name(instance.cluster_id, instance.role, instance.index),
    )


class NodeOperator:
    """The node work a plugin does during a resize (apps.products.base.Operator), on the
    cluster's records: members by their records, commands in their containers, events."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.cluster_id = cluster.id
        self.plugin: ProductPlugin = plugin_for(cluster.definition)
        policy = ScalingPolicy.objects.filter(cluster_id=cluster.id).first()
        self.drain_seconds = (
            policy.decommission_timeout_seconds if policy else settings.RESIZE_DRAIN_SECONDS
        )

    def _instances(self, ids) -> list[Instance]:
        return list(Instance.objects.filter(id__in=ids).select_related("node", "address"))

    def _instance(self, member: Member) -> Instance:
        found = Instance.objects.select_related("node", "address").get(id=member.id)
        if found.node is None:
            raise ResizeFailed(f"{found} is on no node")
        return found

    def _client(self, member: Member) -> nodes.NodeClient:
        node = self._instance(member).node
        assert node is not None  # _instance checked it
        return nodes.client(node)

    def members(self) -> list[Member]:
        active = self.cluster.instances.filter(active=True).select_related("address")
        return [member_of(i) for i in active.order_by("id")]

    def exec(self, member: Member, argv: list[str], timeout: int = 120) -> tuple[int, str]:
        return self._client(member).exec(member.container, argv, timeout)

    def run(self, member: Member, argv: list[str], timeout: int = 120) -> str:
        code, output = self.exec(member, argv, timeout)
        if code != 0:
            raise ResizeFailed(
                f"{' '.join(argv[:3])} in {member.hostname} exited with {code}: {output[-300:]}"
            )
        return output

    def event(self, message: str, level: str = "info") -> None:
        record_event(self.cluster_id, message, level)

    def container_state(self, member: Member) -> str | None:
        return self._client(member).container_state(member.container)

    def running(self, member: Member) -> bool:
        instance = Instance.objects.select_related("node").get(id=member.id)
        return instance.node is not None and (
            nodes.client(instance.node).container_state(member.container) == "running"
        )

    def start(self, member: Member, environment: dict[str, str]) -> None:
        """The member's container started with `environment` added to its own."""
        instance = self._instance(member)
        spec = next(s for s in plans.plans_for(self.cluster) if s.instance_id == member.id)
        container_id, _ = self._client(member).ensure_running(
            replace(spec, environment={**spec.environment, **environment})
        )
        Instance.objects.filter(id=member.id).update(container_id=container_id)
        assert instance.node is not None  # _instance checked it
        record_event(self.cluster_id, f"{member.hostname} started on {instance.node.name}")

    def stop(self, members: list[Member]) -> None:
        _stop_leaving(self.cluster, self._instances(m.id for m in members))

    def restart(self, member: Member) -> None:
        client = self._client(member)
        client.stop(member.container)
        client.start(member.container)

    def remove(self, members: list[Member], keep_data: bool) -> None:
        _remove(self.cluster, self._instances(m.id for m in members), keep_data)

    def logs(self, member: Member, lines: int) -> str:
        """The end of the member's log, secrets masked; empty when its node has none."""
        try:
            text = self._client(member).logs(member.container, lines)
        except NodeError:
            return ""
        return redact(text, credentials_of(self.cluster))

    def empty_disks(self, member: Member) -> None:
        _empty_disks(self.cluster, self._instance(member))

    def prepare(self, ids: set[int]) -> None:
        _prepare(self.cluster, [s for s in plans.plans_for(self.cluster) if s.instance_id in ids])

    def add_hosts(self, ids: set[int]) -> None:
        _add_hosts(self.cluster, ids)

    def configure_again(self) -> None:
        configure_again(self.cluster)

    def mark_running(self, ids: set[int]) -> None:
        Instance.objects.filter(id__in=ids).update(state=I.RUNNING, restarts=0)

    def join_together(self, ids: set[int]) -> None:
        join_together(self.cluster, ids)


def _stop_leaving(cluster: Cluster, leaving: list[Instance]) -> None:
    results = parallel(
        lambda i: nodes.client(i.node).stop(plans.container_name(cluster.id, i.role, i.index)),
        leaving,
    )
    for instance, outcome in zip(leaving, results, strict=True):
        if isinstance(outcome, Exception):
            raise node_steps.named(outcome, f"could not stop {instance}")


def _empty_disks(cluster: Cluster, instance: Instance) -> None:
    """A new member starts on empty disks: one that a removed member of this cluster kept its
    data on (a shrink keeps it, as a destroy does) would make it start as that member."""
    assert instance.node is not None  # reserved
    site, name = plans.data_folder(cluster).split("/", 1)
    disks = plans.disks_of([instance])[instance.id]
    binds = [f"{d.mount_path}/{site}:/wipe/{n}:rw" for n, d in enumerate(disks, start=1)]
    code, output = nodes.client(instance.node).run_helper(
        ["sh", "-c", 'rm -rf /wipe/*/"$1"', "wipe", name],  # the folder as an argument
        binds,
        ("DAC_OVERRIDE", "FOWNER"),
        labels=node_steps.wipe_labels(cluster.id),
    )
    if code != 0:
        raise ResizeFailed(f"could not empty the disks of {instance.hostname}: {output[-200:]}")
