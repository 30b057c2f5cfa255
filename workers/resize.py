"""The resize operation's step: resizing → running with Cluster.resize_to instances of the
product's scalable role (apps/clusters/resize.py holds the rules and refuses what it must).

Growing: the instances the request added are reserved all or nothing (the launch's
reservation), their containers created on the cluster's network with every member in their
hosts, the older members given the new names (/etc/hosts), then the product's configure steps
run again for the new shape (new DataNodes and NodeManagers live, new Spark workers ALIVE).
Cassandra's new nodes join one at a time instead (JOINS): each bootstraps (UJ, streaming its
ranges) and is UN before the next starts; then the older nodes run nodetool cleanup.
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

import json
import logging
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps import nodes
from apps.clusters import container_specs as plans
from apps.clusters import notebook
from apps.clusters import perimeter as perimeter_rules
from apps.clusters import resize as rules
from apps.clusters.credentials import ENV_PASSWORD, ENV_SECRET, ENV_USER, credentials_of, redact
from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation, Instance
from apps.clusters.reservation import Rejection, reserve_added
from apps.clusters.transitions import record_event, transition
from apps.inventory.models import Address, Disk, Network
from apps.nodes import NodeError, parallel
from apps.nodes.specs import ContainerSpec

from . import lifecycle, perimeter

log = logging.getLogger(__name__)
S = Cluster.State
I = Instance.State  # noqa: E741
ERROR = ClusterEvent.Level.ERROR
WARNING = ClusterEvent.Level.WARNING


class ResizeFailed(Exception):
    """The resize cannot finish; what it changed is put back and the message is the reason
    a user reads (the cluster runs on as it was)."""


def resize(cluster_id: int) -> str:
    """resizing → running at the asked size, or back to running as it was with the reason."""
    cluster = (
        Cluster.objects.select_related("version__product", "revision").filter(id=cluster_id).first()
    )
    if cluster is None:
        return "gone"
    if cluster.state != S.RESIZING:
        return cluster.state
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
            Cluster.objects.filter(id=cluster_id).update(resize_to=None)


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
    JOINS.get(cluster.version.product.name, join_together)(cluster, ids)
    Instance.objects.filter(id__in=ids, active=True).update(state=I.RUNNING, restarts=0)


def join_together(cluster: Cluster, ids: set[int]) -> None:
    """The new instances start at once and the product's checks run again; when any of it
    fails they are all removed and given back (ResizeFailed)."""
    try:
        if (admit := ADMITS.get(cluster.version.product.name)) is not None:
            admit(cluster, list(Instance.objects.filter(id__in=ids).select_related("address")))
        _start(cluster, ids)
        _add_hosts(cluster, ids)
        configure_again(cluster)
    except ResizeFailed:
        _remove(cluster, list(Instance.objects.filter(id__in=ids)), keep_data=False)
        raise
    except (lifecycle.StepFailed, TimeoutError) as error:
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
            raise lifecycle._named(outcome, f"could not start {spec.hostname}")
        Instance.objects.filter(id=spec.instance_id).update(container_id=outcome[0])
        record_event(cluster.id, f"{spec.hostname} started on {spec.node.name}")


def _prepare(cluster: Cluster, specs: list[ContainerSpec]) -> None:
    """The specs' images and the cluster's network on their nodes, and disks handed over
    from another cluster emptied of its data (as a launch prepares its nodes)."""
    ids = {s.instance_id for s in specs}
    held = cluster.instances.filter(id__in=ids).values("address__network_id")
    networks = set(Network.objects.filter(id__in=held))
    on_nodes = {s.node.id: s.node for s in specs}
    labels = lifecycle.wipe_labels(cluster.id)
    folder = plans.data_folder(cluster)
    handed_over = lifecycle._kept_by_others(cluster)
    prepared = parallel(
        lambda node: lifecycle._prepare_node(
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
            raise lifecycle._named(outcome, f"could not update the hosts of {instance}")
        if outcome[0] != 0:
            raise lifecycle.StepFailed(f"updating the hosts of {instance}: {outcome[1][-200:]}")


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
        results = parallel(lambda run, step=step: lifecycle._exec(run, step.timeout), runs)
        for (instance, _name, _argv), outcome in zip(runs, results, strict=True):
            if isinstance(outcome, Exception):
                raise lifecycle.StepFailed(f"{step.description}: {instance}: {outcome}")
            code, output = outcome
            if code != 0:
                tail = redact(output, secrets).strip()[-400:]
                raise lifecycle.StepFailed(
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
    product = cluster.version.product.name
    drain = DRAINS.get(product)
    if drain is not None:
        drain(cluster, leaving)
    # A drain may have removed some itself (Cassandra: each node once it left the ring).
    ids = [i.id for i in leaving]
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
            raise lifecycle._named(outcome, f"could not remove {instance}")
    left = perimeter_rules.nodes_of(cluster.id)
    release_instances(cluster.id, [i.id for i in instances], keep_data)
    lifecycle.unguard(cluster.id, left)


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


# ------------------------------------------------------------------ product drains

NAMENODE_INFO = (
    "import json, urllib.request; "
    "u = 'http://localhost:9870/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo'; "
    "b = json.load(urllib.request.urlopen(u, timeout=10))['beans'][0]; "
    "print(json.dumps({k: json.loads(b[k]) for k in ('LiveNodes', 'DecomNodes')}))"
)
# The NodeManagers YARN still drains gracefully (DECOMMISSIONING: their containers run on,
# no new ones start), by hostname, with the containers each still runs.
YARN_DRAINING = (
    "import json, urllib.request; "
    "u = 'http://localhost:8088/ws/v1/cluster/nodes?states=DECOMMISSIONING'; "
    "n = (json.load(urllib.request.urlopen(u, timeout=10)).get('nodes') or {}).get('node', []); "
    "print(json.dumps({x['nodeHostName']: x.get('numContainers', 0) for x in n}))"
)
EXCLUDE = "/opt/hadoop/etc/hadoop/platter.exclude"
YARN_EXCLUDE = "/opt/hadoop/etc/hadoop/platter.yarn-exclude"
# The exclude files named in the master's configuration (read again by every refreshNodes).
ADD_EXCLUDE_PROPERTIES = f"""
import re
for name, key, path in (("hdfs-site.xml", "dfs.hosts.exclude", "{EXCLUDE}"),
                        ("yarn-site.xml", "yarn.resourcemanager.nodes.exclude-path",
                         "{YARN_EXCLUDE}")):
    f = "/opt/hadoop/etc/hadoop/" + name
    text = open(f).read()
    if key not in text:
        prop = "  <property><name>%s</name><value>%s</value></property>\\n" % (key, path)
        open(f, "w").write(text.replace("</configuration>", prop + "</configuration>"))
    open(path, "a").close()
"""


def _master(cluster: Cluster, role: str = "master") -> tuple[Instance, str]:
    master = cluster.instances.filter(role=role, active=True).select_related("node").first()
    if master is None:
        raise ResizeFailed(f"the cluster has no running {role}")
    return master, plans.container_name(cluster.id, master.role, master.index)


def _run(instance: Instance, container: str, argv: list[str], timeout: int = 120) -> str:
    if instance.node is None:
        raise ResizeFailed(f"{instance} is on no node")
    code, output = nodes.client(instance.node).exec(container, argv, timeout)
    if code != 0:
        raise ResizeFailed(
            f"{' '.join(argv[:3])} in {instance} exited with {code}: {output[-300:]}"
        )
    return output


def hdfs_nodes(master: Instance, container: str) -> dict:
    """The NameNode's view of its DataNodes: LiveNodes and DecomNodes, by name."""
    output = _run(master, container, ["python3", "-c", NAMENODE_INFO], 60)
    return json.loads(output.strip().splitlines()[-1])


def yarn_draining(master: Instance, container: str) -> dict[str, int]:
    """The ResourceManager's view: NodeManagers still decommissioning, and their containers."""
    output = _run(master, container, ["python3", "-c", YARN_DRAINING], 60)
    return json.loads(output.strip().splitlines()[-1])


def _match(nodes_by_name: dict, instance: Instance) -> dict | None:
    ip = instance.address.ip if instance.address else None
    for name, info in nodes_by_name.items():
        if name.split(":")[0] == instance.hostname or (
            ip and str(info.get("xferaddr", "")).split(":")[0] == ip
        ):
            return info
    return None


def drain_hadoop(cluster: Cluster, leaving: list[Instance]) -> None:
    """HDFS decommission of the leaving DataNodes and YARN's graceful one of their
    NodeManagers (the tasks running there finish; none start there meanwhile): refused when
    their data would not fit on the workers that stay; done once the NameNode says each is
    Decommissioned and YARN runs nothing more on them, with the blocks and containers left as
    events; past RESIZE_DRAIN_SECONDS they go back into service and the resize fails."""
    master, container = _master(cluster)
    leaving = list(
        Instance.objects.filter(id__in=[i.id for i in leaving]).select_related("node", "address")
    )
    # A resumed resize: containers stopped only once decommissioned (below) are done.
    leaving = [i for i in leaving if _running(cluster, i)]
    if not leaving:
        return
    live = hdfs_nodes(master, container)["LiveNodes"]
    used = sum((_match(live, i) or {}).get("usedSpace", 0) for i in leaving)
    staying = [
        info for name, info in live.items() if not any(_match({name: info}, i) for i in leaving)
    ]
    free = sum(info.get("remaining", 0) for info in staying)
    if used > free:
        raise ResizeFailed(
            f"the HDFS data on the leaving workers ({used / 2**30:.2f} GiB) would not fit on "
            f"the {len(staying)} that stay ({free / 2**30:.2f} GiB free)"
        )
    ips = [i.address.ip for i in leaving if i.address]
    names = [i.hostname for i in leaving]
    _run(master, container, ["python3", "-c", ADD_EXCLUDE_PROPERTIES])
    _set_excluded(master, container, ips, names, True)
    record_event(cluster.id, f"HDFS and YARN decommission of {', '.join(names)} started")
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    said = ""
    while True:
        report = hdfs_nodes(master, container)
        states = [(_match(report["LiveNodes"], i) or {}).get("adminState", "") for i in leaving]
        draining = yarn_draining(master, container)
        running = sum(draining.get(name, 0) for name in names)
        yarn_done = not any(name in draining for name in names)
        if yarn_done and all(state == "Decommissioned" for state in states):
            break
        left = sum(
            int((_match(report["DecomNodes"], i) or {}).get("underReplicatedBlocks", 0))
            for i in leaving
        )
        progress = f"HDFS decommission: {left} blocks left to replicate ({', '.join(states)})"
        if not yarn_done:
            progress += f"; YARN: {running} containers still running on them"
        if progress != said:
            record_event(cluster.id, progress)
            said = progress
        if time.monotonic() > deadline:
            _set_excluded(master, container, ips, names, False)  # back into service
            raise ResizeFailed(
                f"the decommission did not end in {settings.RESIZE_DRAIN_SECONDS} s "
                f"({left} blocks left to replicate, {running} YARN containers still "
                "running); the workers are back in service"
            )
        time.sleep(settings.RESIZE_POLL_SECONDS)
    record_event(
        cluster.id,
        f"{', '.join(names)} decommissioned: their blocks have copies elsewhere and their "
        "YARN tasks ended",
    )
    # They stay excluded once stopped (Decommissioned, then dead: the NameNode never puts
    # them back into service); a later worker given the same address is let in (_grow).
    _stop_leaving(cluster, leaving)


def _running(cluster: Cluster, instance: Instance) -> bool:
    name = plans.container_name(cluster.id, instance.role, instance.index)
    return instance.node is not None and nodes.client(instance.node).container_state(name) == (
        "running"
    )


def _stop_leaving(cluster: Cluster, leaving: list[Instance]) -> None:
    results = parallel(
        lambda i: nodes.client(i.node).stop(plans.container_name(cluster.id, i.role, i.index)),
        leaving,
    )
    for instance, outcome in zip(leaving, results, strict=True):
        if isinstance(outcome, Exception):
            raise lifecycle._named(outcome, f"could not stop {instance}")


# Adds (argv[1] "add") or removes the given lines in both exclude files; exits 0 only when a
# file changed, so the NameNode and ResourceManager are asked to read them only then.
EDIT_EXCLUDES = f"""
import os, sys
add, changed = sys.argv[1] == "add", False
for path, names in (("{EXCLUDE}", sys.argv[2].split()), ("{YARN_EXCLUDE}", sys.argv[3].split())):
    old = open(path).read().split() if os.path.exists(path) else []
    new = sorted(set(old) | set(names)) if add else [n for n in old if n not in names]
    if sorted(new) != sorted(old):
        open(path, "w").write("".join(n + "\\n" for n in new))
        changed = True
sys.exit(0 if changed else 3)
"""


def _set_excluded(
    master: Instance, container: str, ips: list[str], names: list[str], add: bool
) -> None:
    """Add the workers to the exclude files (or take them out) and have the NameNode and the
    ResourceManager read them when they changed. YARN decommissions gracefully: the
    ResourceManager lets the containers running there end (for RESIZE_DRAIN_SECONDS at
    most, which drain_hadoop waits for) instead of killing them."""
    edit = shlex.join(
        ["python3", "-c", EDIT_EXCLUDES, "add" if add else "remove", " ".join(ips), " ".join(names)]
    )
    yarn = ["yarn", "rmadmin", "-refreshNodes"]
    if add:
        yarn += ["-g", str(settings.RESIZE_DRAIN_SECONDS), "-server"]
    script = f"if {edit}; then hdfs dfsadmin -refreshNodes && {shlex.join(yarn)}; fi"
    _run(master, container, ["sh", "-c", script], 180)


def admit_hadoop(cluster: Cluster, added: list[Instance]) -> None:
    """New workers whose address a removed one had are taken out of the exclude files."""
    master, container = _master(cluster)
    ips = [i.address.ip for i in added if i.address]
    _set_excluded(master, container, ips, [i.hostname for i in added], False)


def drain_spark(cluster: Cluster, leaving: list[Instance]) -> None:
    """Spark workers leave once no executor runs on them (cores used 0 on the master's
    status), or the resize fails past RESIZE_DRAIN_SECONDS."""
    master, container = _master(cluster)
    url = f"http://{master.hostname}:8080/json/"
    names = {i.hostname for i in leaving} | {i.address.ip for i in leaving if i.address}
    probe = (
        "import json, urllib.request; "
        f"s = json.load(urllib.request.urlopen({url!r}, timeout=10)); "
        "print(json.dumps([[w.get('host'), w.get('state'), w.get('coresused', 0)] "
        "for w in s.get('workers', [])]))"
    )
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    while True:
        workers = json.loads(_run(master, container, ["python3", "-c", probe]).splitlines()[-1])
        busy = [w for w in workers if w[0] in names and w[1] == "ALIVE" and w[2]]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise ResizeFailed(
                f"executors still run on {', '.join(w[0] for w in busy)} after "
                f"{settings.RESIZE_DRAIN_SECONDS} s; the workers stay"
            )
        record_event(cluster.id, f"waiting for executors to end on {len(busy)} workers")
        time.sleep(settings.RESIZE_POLL_SECONDS)


# ------------------------------------------------------------------ Cassandra's ring
#
# Every change goes through a seed's view of the ring (`nodetool status`; seeds never leave)
# and through cqlsh on that seed, logged in as the owner by root's ~/.cassandra/credentials
# (cassandra-start writes it).

NODETOOL_SECONDS = 120
CQLSH_SECONDS = 90
# How long a node that did not join may stay listed (gossip forgets a dead joining node after
# its ring delay; one that became a member is removed with nodetool removenode).
FORGET_SECONDS = 120
RESTART_SECONDS = 300  # a restarted node back to UN (JVM start, commit log replay, gossip)
DECOMMISSION_LOG = "/var/log/platter-decommission.log"
DECOMMISSION_RC = "/var/log/platter-decommission.rc"
# In the background: it runs as long as the streaming does; the worker follows the ring. Not
# twice: a resumed resize may come before the node said it was leaving.
DECOMMISSION = (
    "pgrep -f '[N]odeTool.* decommission' > /dev/null && exit 0; "
    f"rm -f {DECOMMISSION_RC}; "
    f"(nodetool decommission; echo $? > {DECOMMISSION_RC}) > {DECOMMISSION_LOG} 2>&1 "
    "< /dev/null &"
)
DECOMMISSION_OUTCOME = f"cat {DECOMMISSION_RC} && tail -c 300 {DECOMMISSION_LOG}"
# The start script's switch: a node added to a running ring streams its ranges before it
# serves them (a launch's nodes start at once as a brand-new ring, without).
BOOTSTRAP = {"CASSANDRA_AUTO_BOOTSTRAP": "true"}
STATUS_LINE = re.compile(r"^([UD][NLJM])\s+(\S+)\s")
HOST_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


@dataclass(frozen=True)
class RingMember:
    state: str  # nodetool's two letters: Up/Down, then Normal/Leaving/Joining/Moving
    address: str
    host_id: str
    datacenter: str


def parse_ring(output: str) -> dict[str, RingMember]:
    """`nodetool status` as ring members by address."""
    members: dict[str, RingMember] = {}
    datacenter = ""
    for line in output.splitlines():
        if line.startswith("Datacenter:"):
            datacenter = line.split(":", 1)[1].strip()
            continue
        found = STATUS_LINE.match(line)
        if found is None:
            continue
        address = found.group(2).split(":")[0]  # an ip:port with --print-port
        host_id = HOST_ID.search(line)
        members[address] = RingMember(
            found.group(1), address, host_id.group(0) if host_id else "", datacenter
        )
    return members


def _container(instance: Instance) -> str:
    return plans.container_name(instance.cluster_id, instance.role, instance.index)


def _ip(instance: Instance) -> str:
    return instance.address.ip if instance.address else ""


def ring_of(observer: Instance) -> dict[str, RingMember]:
    """The ring as the observer (a seed) sees it."""
    return parse_ring(
        _run(observer, _container(observer), ["nodetool", "status"], NODETOOL_SECONDS)
    )


def cql(observer: Instance, statement: str) -> str:
    """cqlsh on the observer, logged in as the cluster's owner."""
    argv = [
        "cqlsh",
        "--no-color",
        f"--request-timeout={CQLSH_SECONDS - 30}",
        observer.hostname,
        "9042",
        "-e",
        statement,
    ]
    return _run(observer, _container(observer), argv, CQLSH_SECONDS)


def keyspace_factors(observer: Instance) -> dict[str, int]:
    """Each keyspace's replication factor, from system_schema.keyspaces."""
    output = cql(observer, "SELECT JSON keyspace_name, replication FROM system_schema.keyspaces")
    factors = {}
    for line in output.splitlines():
        if line.strip().startswith("{"):
            row = json.loads(line)
            factors[row["keyspace_name"]] = rules.replication_factor(row["replication"])
    if not factors:
        raise ResizeFailed(f"cqlsh listed no keyspaces: {output.strip()[-200:]}")
    return factors


def _observer(members: list[Instance]) -> Instance:
    seeds = sorted((i for i in members if i.role == "seed"), key=lambda i: i.index)
    if not seeds:
        raise ResizeFailed("the cluster has no running seed")
    return seeds[0]


def _datacenter(ring: dict[str, RingMember], observer: Instance) -> str:
    found = ring.get(_ip(observer))
    return (found.datacenter if found else "") or "dc1"


def _ring_ready(
    ring: dict[str, RingMember],
    members: list[Instance],
    doing: str,
    changing: list[Instance],
    allowed: tuple[str, ...],
) -> None:
    """Every member, and anything else the ring lists, up and normal (UN); the nodes this
    resize changes may also be in the `allowed` states or not listed (a resumed resize finds
    them joining or leaving, or gone). ResizeFailed naming those that are not."""
    problems = []
    for member in members:
        found = ring.get(_ip(member))
        if found is None or found.state != "UN":
            problems.append(f"{member.hostname} is {found.state if found else 'not in the ring'}")
    for member in changing:
        found = ring.get(_ip(member))
        if found is not None and found.state not in ("UN", *allowed):
            problems.append(f"{member.hostname} is {found.state}")
    ours = {_ip(m) for m in [*members, *changing]}
    problems += [f"{a} is {m.state}" for a, m in ring.items() if a not in ours and m.state != "UN"]
    if problems:
        raise ResizeFailed(
            f"{'; '.join(problems)}: every node must be up and normal (UN in nodetool status) "
            f"before {doing}"
        )


def join_cassandra(cluster: Cluster, ids: set[int]) -> None:
    """The new nodes join the ring one at a time: each starts only once the one before is UN
    (bootstrapping nodes at once could pick overlapping ranges and stream from nodes about to
    give them away); the seeds are unchanged. Then system_auth is replicated to
    min(3, nodes) and repaired, the product's checks run again, and the older nodes run
    nodetool cleanup. When one does not join, it and those not started are removed and given
    back, those that joined stay, and the older nodes still clean up (ResizeFailed)."""
    members = list(
        cluster.instances.filter(active=True).select_related("node", "address").order_by("id")
    )
    old = [i for i in members if i.id not in ids]
    new = sorted((i for i in members if i.id in ids), key=lambda i: i.index)
    observer: Instance | None = None
    joined: list[Instance] = []
    try:
        observer = _observer(old)
        ring = ring_of(observer)
        # A resumed resize: those UN joined before the worker died.
        joined = [i for i in new if getattr(ring.get(_ip(i)), "state", "") == "UN"]
        _ring_ready(ring, old, "nodes join", new, ("UJ", "DJ", "DN"))
        specs = {s.instance_id: s for s in plans.plans_for(cluster) if s.instance_id in ids}
        _prepare(cluster, list(specs.values()))
        _add_hosts(cluster, ids)
        for instance in new:
            if instance not in joined:
                _join_one(cluster, observer, instance, specs[instance.id])
                joined.append(instance)
    except (ResizeFailed, lifecycle.StepFailed, TimeoutError) as error:
        Instance.objects.filter(id__in=[i.id for i in joined]).update(state=I.RUNNING, restarts=0)
        notes = _drop_joiners(cluster, observer, [i for i in new if i not in joined])
        if joined:
            _clean_up(cluster, old)
            stay = ", ".join(i.hostname for i in joined)
            notes.append(f"{stay} joined and stay{'s' if len(joined) == 1 else ''}")
        raise ResizeFailed("; ".join([str(error), *notes])) from error
    try:
        _replicate_auth(cluster, observer, members, _datacenter(ring, observer))
        configure_again(cluster)
    except (ResizeFailed, lifecycle.StepFailed, TimeoutError) as error:
        Instance.objects.filter(id__in=ids).update(state=I.RUNNING, restarts=0)
        _clean_up(cluster, old)
        raise ResizeFailed(f"the new nodes joined, but {error}") from error
    _clean_up(cluster, old)


def _join_one(
    cluster: Cluster, observer: Instance, instance: Instance, spec: ContainerSpec
) -> None:
    """Start the node (unless a resumed resize started it) and wait until the observer sees
    it UN, reporting UJ; ResizeFailed when its container stops or past RESIZE_DRAIN_SECONDS."""
    assert instance.node is not None  # reserved
    client = nodes.client(instance.node)
    state = client.container_state(spec.name)
    if state is None:
        _empty_disks(cluster, instance)
    if state != "running":
        container_id, _ = client.ensure_running(
            replace(spec, environment={**spec.environment, **BOOTSTRAP})
        )
        Instance.objects.filter(id=instance.id).update(container_id=container_id)
        record_event(cluster.id, f"{instance.hostname} started on {instance.node.name}")
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    said, why = "", "not in the ring yet"
    while True:
        try:
            found = ring_of(observer).get(_ip(instance))
        except ResizeFailed as error:  # a busy seed's nodetool; asked again
            found, why = None, str(error)
        if found is not None and found.state == "UN":
            record_event(cluster.id, f"{instance.hostname} joined the ring (UN)")
            return
        if found is not None:
            why = found.state
            progress = f"{instance.hostname} is joining the ring ({found.state})"
            if found.state == "UJ":
                progress += ": streaming its share of the data"
            if progress != said:
                record_event(cluster.id, progress)
                said = progress
        if client.container_state(spec.name) not in ("running", "restarting"):
            raise ResizeFailed(
                f"{instance.hostname} stopped while joining the ring: "
                f"{_last_words(cluster, instance)}"
            )
        if time.monotonic() > deadline:
            raise ResizeFailed(
                f"{instance.hostname} did not join the ring in {settings.RESIZE_DRAIN_SECONDS} "
                f"s ({why})"
            )
        time.sleep(settings.RESIZE_POLL_SECONDS)


def _last_words(cluster: Cluster, instance: Instance) -> str:
    """The end of a container's log, secrets masked; empty when the node has none."""
    assert instance.node is not None  # reserved
    try:
        log = nodes.client(instance.node).logs(_container(instance), 5)
    except NodeError:
        return ""
    return redact(log, credentials_of(cluster)).strip()[-300:]


def _empty_disks(cluster: Cluster, instance: Instance) -> None:
    """A new node starts on empty disks: one that a removed member of this cluster kept its
    data on (a shrink keeps it, as a destroy does) would make it start as that member, with
    its host id and tokens (a decommissioned one refuses to start at all)."""
    assert instance.node is not None  # reserved
    site, name = plans.data_folder(cluster).split("/", 1)
    disks = plans.disks_of([instance])[instance.id]
    binds = [f"{d.mount_path}/{site}:/wipe/{n}:rw" for n, d in enumerate(disks, start=1)]
    code, output = nodes.client(instance.node).run_helper(
        ["sh", "-c", 'rm -rf /wipe/*/"$1"', "wipe", name],  # the folder as an argument
        binds,
        ("DAC_OVERRIDE", "FOWNER"),
        labels=lifecycle.wipe_labels(cluster.id),
    )
    if code != 0:
        raise ResizeFailed(f"could not empty the disks of {instance.hostname}: {output[-200:]}")


def _drop_joiners(
    cluster: Cluster, observer: Instance | None, instances: list[Instance]
) -> list[str]:
    """Remove and give back new nodes that did not join (their disks hold nothing worth
    keeping), then see the ring forget them; returns what the user must know if it did not."""
    if not instances:
        return []
    _remove(cluster, instances, keep_data=False)
    if observer is None:
        return []
    notes = []
    for instance in instances:
        note = _forgotten(cluster, observer, instance)
        if note:
            notes.append(note)
    return notes


def _forgotten(cluster: Cluster, observer: Instance, instance: Instance) -> str:
    """Wait until the ring no longer lists a removed node: a joining one is forgotten by
    gossip; one that had become a member (DN) is removed with nodetool removenode (its
    ranges streamed from their other copies). Returns a note when it is still listed."""
    deadline = time.monotonic() + FORGET_SECONDS
    removing = False
    while True:
        try:
            found = ring_of(observer).get(_ip(instance))
        except ResizeFailed as error:
            return f"whether the ring forgot {instance.hostname} is unknown: {error}"
        if found is None:
            return ""
        if found.state in ("DN", "DL") and found.host_id and not removing:
            record_event(cluster.id, f"nodetool removenode {instance.hostname} ({found.host_id})")
            argv = ["nodetool", "removenode", found.host_id]
            _run(observer, _container(observer), argv, settings.RESIZE_DRAIN_SECONDS)
            removing = True
            continue
        if time.monotonic() > deadline:
            return (
                f"{instance.hostname} ({found.address}) is still listed in the ring "
                f"({found.state}); nodetool removenode {found.host_id} on a seed removes it"
            )
        time.sleep(settings.RESIZE_POLL_SECONDS)


def _replicate_auth(
    cluster: Cluster, observer: Instance, members: list[Instance], datacenter: str
) -> None:
    """system_auth to min(3, nodes) copies, as cassandra-auth makes it at launch (and will
    again in the checks), but repaired at once on every node: a node made a replica of the
    owner's role without its data would refuse the owner's logins."""
    wanted = min(3, len(members))
    had = keyspace_factors(observer).get("system_auth", 0)
    if had >= wanted:
        return
    cql(
        observer,
        "ALTER KEYSPACE system_auth WITH replication = "
        f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': {wanted}}}",
    )
    for member in members:  # -pr on every node: each range repaired once
        argv = ["nodetool", "repair", "--full", "-pr", "system_auth"]
        _run(member, _container(member), argv, settings.RESIZE_DRAIN_SECONDS)
    record_event(
        cluster.id, f"system_auth keeps {wanted} copies now (was {had}), repaired on every node"
    )


def _clean_up(cluster: Cluster, old: list[Instance]) -> None:
    """nodetool cleanup on the nodes that were there before, one at a time: each drops the
    ranges it gave the new nodes, which it would otherwise keep for ever (and serve again,
    deletes forgotten, should it own them again after a shrink). A cleanup that fails is
    worth a warning, not the resize: the data is where it should be."""
    for member in old:
        try:
            _run(member, _container(member), ["nodetool", "cleanup"], settings.RESIZE_DRAIN_SECONDS)
        except (ResizeFailed, TimeoutError) as error:
            record_event(
                cluster.id,
                f"nodetool cleanup on {member.hostname} did not finish ({error}); the ranges "
                "it gave away stay on its disks until it runs there",
                WARNING,
            )
        else:
            record_event(
                cluster.id, f"nodetool cleanup on {member.hostname}: ranges it gave away dropped"
            )


def drain_cassandra(cluster: Cluster, leaving: list[Instance]) -> None:
    """Refused before anything changes when a node is not UN or a keyspace keeps more copies
    than nodes would stay (rules.ring_shrink_refusal); Cassandra's own keyspaces are lowered
    to the nodes that stay instead. Then each leaving node, the highest index first, runs
    nodetool decommission (streaming its data to the others), and once a seed's ring no
    longer lists it, it is stopped, removed and released before the next one starts."""
    ids = {i.id for i in leaving}
    members = list(
        cluster.instances.filter(active=True).select_related("node", "address").order_by("id")
    )
    leaving = sorted((i for i in members if i.id in ids), key=lambda i: -i.index)
    staying = [i for i in members if i.id not in ids]
    observer = _observer(staying)
    ring = ring_of(observer)
    _ring_ready(ring, staying, "a shrink", leaving, ("UL",))
    factors = keyspace_factors(observer)
    refusal = rules.ring_shrink_refusal(factors, len(staying))
    if refusal:
        raise ResizeFailed(refusal)
    datacenter = _datacenter(ring, observer)
    for name in rules.CASSANDRA_OWN_KEYSPACES:
        if factors.get(name, 0) > len(staying):
            cql(
                observer,
                f"ALTER KEYSPACE {name} WITH replication = "
                f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': {len(staying)}}}",
            )
            record_event(
                cluster.id,
                f"{name} keeps {len(staying)} copies now (was {factors[name]}): no more than "
                "the nodes that stay",
            )
    for instance in leaving:
        _decommission(cluster, observer, instance)
        _stop_leaving(cluster, [instance])
        _remove(cluster, [instance], keep_data=True)


def _decommission(cluster: Cluster, observer: Instance, instance: Instance) -> None:
    """nodetool decommission on the node (unless a resumed resize started it), followed in
    the observer's ring until the node is gone. When it fails, its container stops, or it runs
    past RESIZE_DRAIN_SECONDS, the node is put back into the ring (ResizeFailed)."""
    name = instance.hostname
    found = ring_of(observer).get(_ip(instance))
    if found is None:
        return  # it left before a worker died
    if found.state != "UL":
        _run(instance, _container(instance), ["sh", "-c", DECOMMISSION], 60)
        record_event(
            cluster.id, f"nodetool decommission on {name}: it streams its data to the others"
        )
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    said = ""
    while True:
        found = ring_of(observer).get(_ip(instance))
        if found is None:
            break
        progress = f"{name} is leaving the ring ({found.state})"
        if found.state == "UL":
            progress += ": streaming its data to the others"
        if progress != said and found.state != "UN":  # UN: it has not started leaving yet
            record_event(cluster.id, progress)
            said = progress
        failure = ""
        if not _running(cluster, instance):
            failure = f"{name} stopped while leaving the ring"
        elif (outcome := _decommission_outcome(instance)) is not None and outcome[0] != 0:
            failure = f"nodetool decommission on {name} failed: {outcome[1]}"
        elif time.monotonic() > deadline:
            failure = f"the decommission of {name} did not end in {settings.RESIZE_DRAIN_SECONDS} s"
        if failure:
            back = _back_in_ring(cluster, observer, instance)
            if back is None:
                break
            raise ResizeFailed(f"{failure}; {back}")
        time.sleep(settings.RESIZE_POLL_SECONDS)
    record_event(cluster.id, f"{name} left the ring (decommissioned)")


def _decommission_outcome(instance: Instance) -> tuple[int, str] | None:
    """The background nodetool decommission's exit code and last output; None while it runs."""
    assert instance.node is not None  # a member
    code, output = nodes.client(instance.node).exec(
        _container(instance), ["sh", "-c", DECOMMISSION_OUTCOME], 30
    )
    first, _, rest = output.strip().partition("\n")
    if code != 0 or not first.strip().isdigit():
        return None
    return int(first), " ".join(rest.split())[-300:]


def _back_in_ring(cluster: Cluster, observer: Instance, instance: Instance) -> str | None:
    """A node whose decommission did not end serves as before: one still leaving (UL) is
    restarted, which ends its decommission (the data it streamed is the others' to clean
    up). Returns how it stands, for the failure's message; None if it left after all."""
    found = ring_of(observer).get(_ip(instance))
    if found is None:
        return None
    if found.state == "UN":
        return f"{instance.hostname} stays in the ring"
    assert instance.node is not None  # a member
    client = nodes.client(instance.node)
    client.stop(_container(instance))
    client.start(_container(instance))
    record_event(cluster.id, f"{instance.hostname} restarted: its decommission is abandoned")
    deadline = time.monotonic() + RESTART_SECONDS
    while True:
        found = ring_of(observer).get(_ip(instance))
        if found is not None and found.state == "UN":
            return f"{instance.hostname} was restarted and is back in the ring (UN)"
        if time.monotonic() > deadline:
            state = found.state if found else "not in the ring"
            return f"{instance.hostname} was restarted but is {state} after {RESTART_SECONDS} s"
        time.sleep(settings.RESIZE_POLL_SECONDS)


# How each product takes part: a drain before leaving instances are removed, an admit before
# new ones start, or a join instead of starting them all at once (join_together).
DRAINS: dict[str, Callable[[Cluster, list[Instance]], None]] = {
    "hadoop": drain_hadoop,
    "spark": drain_spark,
    "cassandra": drain_cassandra,
}
ADMITS: dict[str, Callable[[Cluster, list[Instance]], None]] = {"hadoop": admit_hadoop}
JOINS: dict[str, Callable[[Cluster, set[int]], None]] = {"cassandra": join_cassandra}
