"""The resize operation's step: resizing → running with Cluster.resize_to instances of the
product's scalable role (apps/clusters/resize.py holds the rules and refuses what it must).

Growing: the instances the request added are reserved all or nothing (the launch's
reservation), their containers created on the cluster's network with every member in their
hosts, the older members given the new names (/etc/hosts), then the product's configure steps
run again for the new shape (new DataNodes and NodeManagers live, new Spark workers ALIVE).
Shrinking: the leaving instances are drained by the product first (HDFS decommission, Spark
executors ended), then stopped, removed and released, their data kept as a destroy keeps it.

Safe to run again after a worker died half-way: each phase looks at the instances' records
(pending, reserved, running) and at the product's own state. A resize that cannot finish
(no room, a drain past RESIZE_DRAIN_SECONDS) puts back what it changed and ends with the
cluster running as before and the reason as an error event: never a half-removed node. A
node that does not answer is left to the runner (retried, then the cluster fails)."""

import json
import logging
import shlex
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps import nodes
from apps.clusters import container_specs as plans
from apps.clusters import resize as rules
from apps.clusters.credentials import credentials_of, redact
from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation, Instance
from apps.clusters.reservation import Rejection, reserve_added
from apps.clusters.transitions import record_event, transition
from apps.inventory.models import Address, Disk, Network
from apps.nodes import parallel

from . import lifecycle

log = logging.getLogger(__name__)
S = Cluster.State
I = Instance.State  # noqa: E741
ERROR = ClusterEvent.Level.ERROR


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
    role = rules.scaling_of(cluster).role
    target = cluster.resize_to
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
        _end(cluster_id, f"resize failed, size unchanged: {failure}")
        return Cluster.objects.get(id=cluster_id).state
    count = cluster.instances.filter(role=role, active=True).count()
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
    ids = {i.id for i in added}
    try:
        if (admit := ADMITS.get(cluster.version.product.name)) is not None:
            admit(cluster, list(Instance.objects.filter(id__in=ids).select_related("address")))
        _start(cluster, ids)
        _add_hosts(cluster, ids)
        configure_again(cluster)
    except (lifecycle.StepFailed, TimeoutError) as error:
        _remove(cluster, list(Instance.objects.filter(id__in=ids)), keep_data=False)
        raise ResizeFailed(f"the new instances did not join: {error}") from error
    Instance.objects.filter(id__in=ids, active=True).update(state=I.RUNNING, restarts=0)


def _start(cluster: Cluster, ids: set[int]) -> None:
    """The added instances' containers, as a launch makes them (images and network on their
    nodes first)."""
    specs = [s for s in plans.plans_for(cluster) if s.instance_id in ids]
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
    results = parallel(lambda spec: nodes.client(spec.node).ensure_running(spec), specs)
    for spec, outcome in zip(specs, results, strict=True):
        if isinstance(outcome, Exception):
            raise lifecycle._named(outcome, f"could not start {spec.hostname}")
        Instance.objects.filter(id=spec.instance_id).update(container_id=outcome[0])
        record_event(cluster.id, f"{spec.hostname} started on {spec.node.name}")


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


def _template_env(environment: dict[str, str]) -> list[str]:
    """The product's own PLATTER_* variables (the shape of the cluster); credentials are not
    passed on a command line."""
    return [f"{k}={v}" for k, v in sorted(environment.items()) if k.startswith("PLATTER_")]


# ------------------------------------------------------------------ shrinking


def _shrink(cluster: Cluster, leaving: list[Instance]) -> None:
    product = cluster.version.product.name
    drain = DRAINS.get(product)
    if drain is not None:
        drain(cluster, leaving)
    _remove(cluster, leaving, keep_data=True)


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
    release_instances(cluster.id, [i.id for i in instances], keep_data)


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


def _match(nodes_by_name: dict, instance: Instance) -> dict | None:
    ip = instance.address.ip if instance.address else None
    for name, info in nodes_by_name.items():
        if name.split(":")[0] == instance.hostname or (
            ip and str(info.get("xferaddr", "")).split(":")[0] == ip
        ):
            return info
    return None


def drain_hadoop(cluster: Cluster, leaving: list[Instance]) -> None:
    """HDFS decommission of the leaving DataNodes (and YARN's of their NodeManagers): refused
    when their data would not fit on the workers that stay; done once the NameNode says each
    is Decommissioned, with the blocks left as events; past RESIZE_DRAIN_SECONDS they go back
    into service and the resize fails."""
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
    record_event(cluster.id, f"HDFS decommission of {', '.join(names)} started")
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    said = ""
    while True:
        report = hdfs_nodes(master, container)
        states = [(_match(report["LiveNodes"], i) or {}).get("adminState", "") for i in leaving]
        if all(state == "Decommissioned" for state in states):
            break
        left = sum(
            int((_match(report["DecomNodes"], i) or {}).get("underReplicatedBlocks", 0))
            for i in leaving
        )
        progress = f"HDFS decommission: {left} blocks left to replicate ({', '.join(states)})"
        if progress != said:
            record_event(cluster.id, progress)
            said = progress
        if time.monotonic() > deadline:
            _set_excluded(master, container, ips, names, False)  # back into service
            raise ResizeFailed(
                f"the HDFS decommission did not end in {settings.RESIZE_DRAIN_SECONDS} s "
                f"({left} blocks left to replicate); the workers are back in service"
            )
        time.sleep(settings.RESIZE_POLL_SECONDS)
    record_event(
        cluster.id, f"{', '.join(names)} decommissioned: their blocks have copies elsewhere"
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
    ResourceManager read them when they changed."""
    edit = shlex.join(
        ["python3", "-c", EDIT_EXCLUDES, "add" if add else "remove", " ".join(ips), " ".join(names)]
    )
    script = f"if {edit}; then hdfs dfsadmin -refreshNodes && yarn rmadmin -refreshNodes; fi"
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


DRAINS = {"hadoop": drain_hadoop, "spark": drain_spark}
ADMITS = {"hadoop": admit_hadoop}
