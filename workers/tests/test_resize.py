"""Resize (apps/clusters/resize.py, workers/resize.py) above the node boundary: the rules a
request is refused by, naming why, and the operation's growing and shrinking over fake nodes.
The products themselves joining and leaving: workers/tests/test_resize_lab.py."""

import json
from dataclasses import dataclass

import pytest

from apps.audit.models import AuditEvent
from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.clusters import services, states
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.quotas import QuotaExceeded
from apps.clusters.reservation import reserve
from apps.clusters.resize import ResizeRefused
from apps.inventory.models import Address
from workers import operations

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def version(product: str) -> ProductVersion:
    found = ProductVersion.objects.filter(product__name=product).order_by("id").first()
    assert found is not None, f"the catalog has {product}"
    return found


def running(owner, product: str, **options) -> Cluster:
    """A cluster of the catalog's `product` launched on fake nodes, running."""
    spec = resolve(version(product), options)
    cluster = services.create_cluster(
        owner, version(product), f"c{Cluster.objects.count()}", spec.instances, options
    )
    reserve(cluster.id)
    assert operations.run("launch", cluster.id) == S.RUNNING
    cluster.refresh_from_db()
    return cluster


def workers_of(cluster: Cluster, role: str = "worker") -> list[Instance]:
    return list(cluster.instances.filter(role=role, active=True).order_by("index"))


def test_resize_is_one_operation_of_the_life_cycle_tables():
    op = states.OPERATIONS["resize"]
    assert op.requested_in == (S.RUNNING,) and op.through == (S.RESIZING,)
    assert op.ends_in == S.RUNNING
    assert operations.BY_STATE[S.RESIZING] == "resize"
    assert operations.OPERATIONS["resize"].works_in == (S.RESIZING,)
    assert S.DESTROYING in states.STATES[S.RESIZING].to  # a destroy may come meanwhile
    assert S.RESIZING in states.requested_in("destroy")


def test_a_demo_cluster_grows_on_fake_nodes_and_shrinks_back(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=1, mem=64)
    assert services.request_resize(cluster.id, 3, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING
    grown = workers_of(cluster)
    assert [w.index for w in grown] == [0, 1, 2]
    assert all(w.state == Instance.State.RUNNING and w.container_id for w in grown)
    running_containers = sum(len(fake_nodes.running(n.name)) for n in pool)
    assert running_containers == 4  # the master and three workers
    # The older members were told the new names; the configure steps ran again.
    execs = [c for c in fake_nodes.calls if c[1] == "exec"]
    assert len(execs) >= 2
    audit = AuditEvent.objects.get(action="cluster.resize")
    assert audit.detail["previous"] == 1 and audit.detail["workers"] == 3

    assert services.request_resize(cluster.id, 2, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert [w.index for w in workers_of(cluster)] == [0, 1]
    gone = Instance.objects.get(cluster=cluster, role="worker", index=2)
    assert gone.state == Instance.State.RELEASED and not gone.active
    assert not DiskAllocation.objects.filter(instance=gone, active=True).exists()
    assert DiskAllocation.objects.filter(instance=gone, data_kept=True).exists()
    assert not Address.objects.filter(id=gone.address_id, held=True).exists()
    assert sum(len(fake_nodes.running(n.name)) for n in pool) == 3
    cluster.refresh_from_db()
    assert cluster.resize_to is None
    assert cluster.events.filter(message__contains="resized to 2 workers").exists()


def test_a_grow_with_no_room_ends_running_as_before_with_the_reason(
    fake_nodes, pool, alice, catalog
):
    cluster = running(alice, "demo", size=1, mem=64)
    services.request_resize(cluster.id, 2, actor=alice)
    # Someone else took every free disk meanwhile.
    from apps.inventory.models import Disk

    Disk.objects.filter(state=Disk.State.AVAILABLE).update(state=Disk.State.FAILED)
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert len(workers_of(cluster)) == 1
    assert not cluster.instances.filter(state=Instance.State.PENDING).exists()
    assert cluster.events.filter(message__startswith="resize failed: needs").exists()


def test_a_resize_left_mid_way_is_resumed(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=1, mem=64)
    services.request_resize(cluster.id, 2, actor=alice)
    Cluster.objects.filter(id=cluster.id).update(resizing_at="2000-01-01T00:00Z")
    assert operations.resume_stalled() == [cluster.id]


@pytest.mark.parametrize(
    ("workers", "problem"),
    [
        (0, "role worker allows 1 to 8 instances; asked 0"),
        (9, "role worker allows 1 to 8 instances; asked 9"),
        (2, "already has 2 workers"),
        ("3", "workers must be a whole number"),
    ],
)
def test_a_size_out_of_bounds_is_refused_naming_why(
    fake_nodes, pool, alice, catalog, workers, problem
):
    cluster = running(alice, "demo", size=2, mem=64)
    with pytest.raises(ResizeRefused, match=problem):
        services.request_resize(cluster.id, workers, actor=alice)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING
    assert not AuditEvent.objects.filter(action="cluster.resize").exists()


def test_only_a_running_cluster_is_resized(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=2, mem=64)
    services.request_stop(cluster.id, actor=alice)
    with pytest.raises(services.StateConflict, match="only a running cluster can be resized"):
        services.request_resize(cluster.id, 3, actor=alice)


def test_a_grow_past_the_quota_is_refused_naming_the_limit(
    fake_nodes, pool, alice, catalog, settings
):
    cluster = running(alice, "demo", size=1, mem=64)
    settings.SCHEDULER_DEFAULT_QUOTA = {"max_instances": 3, "max_clusters": 1}
    with pytest.raises(QuotaExceeded, match="instances"):
        services.request_resize(cluster.id, 3, actor=alice)
    # One more fits, though the owner is at their cluster limit: a resize is no new cluster.
    assert services.request_resize(cluster.id, 2, actor=alice) == S.RESIZING


def test_ferretdb_cannot_be_resized(fake_nodes, pool, alice, catalog):
    ferret = ProductVersion.objects.get(product__name="mongodb", version__startswith="ferretdb")
    spec = resolve(ferret, {"size": 1})
    cluster = services.create_cluster(alice, ferret, "ferret", spec.instances, {"size": 1})
    Cluster.objects.filter(id=cluster.id).update(state=S.RUNNING)
    with pytest.raises(ResizeRefused, match="cannot be resized"):
        services.request_resize(cluster.id, 2, actor=alice)


def test_hadoop_is_not_shrunk_below_its_hdfs_replication(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "hadoop", size=2, mem=1536)
    with pytest.raises(ResizeRefused, match=r"HDFS keeps 2 copies .*dfs.replication 2.*asked 1"):
        services.request_resize(cluster.id, 1, actor=alice)
    # A grow pins "auto" to what the NameNode has, so new workers write 2 copies too.
    services.request_resize(cluster.id, 3, actor=alice)
    cluster.refresh_from_db()
    assert cluster.options["replication"] == 2


def test_a_chosen_replication_of_one_allows_a_single_worker(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "hadoop", size=2, mem=1536, replication=1)
    Cluster.objects.filter(id=cluster.id).update(state=S.RUNNING)
    from apps.clusters.resize import plan

    cluster.refresh_from_db()
    assert plan(cluster, 1).target == 1


def namenode(states: dict[str, tuple[str, int, int, int]]) -> dict:
    """What NameNodeInfo says, by hostname: (adminState, used, remaining, blocks left); the
    workers that stay are in service with room."""
    states = {"worker-0": ("In Service", 0, 100, 0), "worker-1": ("In Service", 0, 100, 0)} | states
    return {
        "LiveNodes": {
            f"{host}:9866": {"adminState": s, "usedSpace": used, "remaining": free}
            for host, (s, used, free, _left) in states.items()
        },
        "DecomNodes": {
            f"{host}:9866": {"underReplicatedBlocks": left}
            for host, (s, _used, _free, left) in states.items()
            if s != "In Service"
        },
    }


@pytest.fixture
def hadoop3(fake_nodes, pool, alice, catalog, settings, monkeypatch):
    settings.RESIZE_POLL_SECONDS = 0
    return running(alice, "hadoop", size=3, mem=1536, replication=2)


def script(
    monkeypatch, answers: list[dict], yarn: list[dict[str, int]] | None = None
) -> list[list[str]]:
    """The NameNode answers these in turn (the last one for ever), and the ResourceManager's
    decommissioning nodes those of `yarn` (none by default); returns the exclude lists
    written (hdfs part of each _set_excluded call)."""
    from apps.products.hadoop import decommission as step

    draining = iter(yarn or [{}])
    last_yarn: list[dict[str, int]] = [{}]

    def yarn_draining(_op, _master):
        last_yarn[0] = next(draining, last_yarn[0])
        return last_yarn[0]

    monkeypatch.setattr(step, "yarn_draining", yarn_draining)
    seen = iter(answers)
    last: list[dict] = []
    written: list[list[str]] = []

    def hdfs_nodes(_op, _master):
        last[:] = [next(seen, last[0] if last else answers[-1])]
        return last[0]

    def set_excluded(_op, _master, ips, _names, add):
        written.append(list(ips) if add else [])

    monkeypatch.setattr(step, "hdfs_nodes", hdfs_nodes)
    monkeypatch.setattr(step, "set_excluded", set_excluded)
    return written


def test_hadoop_shrinks_once_the_datanode_is_decommissioned(hadoop3, monkeypatch, fake_nodes):
    gone = workers_of(hadoop3)[2]
    written = script(
        monkeypatch,
        [
            namenode({"worker-2": ("In Service", 10, 100, 0)}),
            namenode({"worker-2": ("Decommission In Progress", 10, 100, 7)}),
            namenode({"worker-2": ("Decommissioned", 10, 100, 0)}),
        ],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 2
    assert written == [[gone.address.ip]]  # excluded, and stays so once stopped
    messages = list(hadoop3.events.values_list("message", flat=True))
    assert "HDFS decommission: 7 blocks left to replicate (Decommission In Progress)" in messages
    assert any("worker-2 decommissioned" in m for m in messages)


def test_a_worker_leaves_only_once_yarn_ran_its_last_task_there(hadoop3, monkeypatch, fake_nodes):
    """HDFS may be done first: the worker still runs YARN containers (graceful decommission
    lets them end), so it is stopped only once the ResourceManager no longer drains it."""
    gone = workers_of(hadoop3)[2]
    decommissioned = namenode({"worker-2": ("Decommissioned", 10, 100, 0)})
    script(
        monkeypatch,
        [decommissioned],
        yarn=[{gone.hostname: 2}, {gone.hostname: 1}, {gone.hostname: 0}, {}],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 2
    messages = list(hadoop3.events.order_by("id").values_list("message", flat=True))
    yarn_said = [m for m in messages if "YARN:" in m]
    assert yarn_said == [
        "HDFS decommission: 0 blocks left to replicate (Decommissioned); YARN: 2 containers "
        "still running on them",
        "HDFS decommission: 0 blocks left to replicate (Decommissioned); YARN: 1 containers "
        "still running on them",
        "HDFS decommission: 0 blocks left to replicate (Decommissioned); YARN: 0 containers "
        "still running on them",
    ]
    done = next(i for i, m in enumerate(messages) if "decommissioned: their blocks" in m)
    assert done > messages.index(yarn_said[-1]), "stopped only after YARN let it go"


def test_the_resource_manager_decommissions_gracefully_for_the_drain_time(
    hadoop3, fake_nodes, settings
):
    """The exclude edit asks YARN for a graceful decommission bounded by the drain time; the
    way back into service is a plain refresh."""
    from apps.products.hadoop import decommission as step
    from workers.resize import NodeOperator

    settings.RESIZE_DRAIN_SECONDS = 77
    op = NodeOperator(hadoop3)
    master = step.master(op)
    fake_nodes.execs.clear()
    fake_nodes.exec_results["hadoop-admin"] = (0, '{"changed": true}')
    step.set_excluded(op, master, ["10.0.0.9"], ["worker-9"], True)
    step.set_excluded(op, master, ["10.0.0.9"], ["worker-9"], False)
    edits = [argv for argv in fake_nodes.execs if argv[:2] == ["hadoop-admin", "exclude"]]
    named = ["--ips", "10.0.0.9", "--names", "worker-9", "--graceful", "77"]
    assert edits == [
        ["hadoop-admin", "exclude", "add", *named],
        ["hadoop-admin", "exclude", "remove", *named],
    ]


def test_a_refused_exclude_edit_fails_the_step_in_hadoop_admins_words(hadoop3, fake_nodes):
    from apps.products.base import ResizeFailed
    from apps.products.hadoop import decommission as step
    from workers.resize import NodeOperator

    op = NodeOperator(hadoop3)
    said = '{"error": "exclude: hdfs dfsadmin exited with 255: refreshNodes: Connection refused"}'
    fake_nodes.exec_results["hadoop-admin"] = (1, said)
    with pytest.raises(ResizeFailed, match=r"^exclude: hdfs dfsadmin exited with 255: refresh"):
        step.set_excluded(op, step.master(op), ["10.0.0.9"], ["worker-9"], True)


def test_a_decommission_past_its_time_puts_the_worker_back_and_fails_the_resize(
    hadoop3, monkeypatch, settings, fake_nodes
):
    settings.RESIZE_DRAIN_SECONDS = 0
    written = script(monkeypatch, [namenode({"worker-2": ("Decommission In Progress", 1, 9, 3)})])
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert [w.index for w in workers_of(hadoop3)] == [0, 1, 2]  # never half removed
    assert all(w.state == Instance.State.RUNNING for w in workers_of(hadoop3))
    assert written[-1] == []  # back into service
    failed = hadoop3.events.get(message__startswith="resize failed")
    assert "did not end in 0 s (3 blocks left to replicate, 0 YARN" in failed.message
    assert "back in service" in failed.message


def test_a_shrink_whose_data_would_not_fit_is_refused(hadoop3, monkeypatch, fake_nodes):
    big = 3 * 2**30
    script(
        monkeypatch,
        [
            namenode(
                {
                    "worker-0": ("In Service", 0, 2**30, 0),
                    "worker-1": ("In Service", 0, 2**30, 0),
                    "worker-2": ("In Service", big, 2**30, 0),
                }
            )
        ],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 3
    failed = hadoop3.events.get(message__startswith="resize failed")
    assert "(3.00 GiB) would not fit on the 2 that stay (2.00 GiB free)" in failed.message


@pytest.mark.parametrize(("cores_used", "removed"), [(0, True), (2, False)])
def test_spark_workers_leave_once_their_executors_ended(
    fake_nodes, pool, alice, catalog, settings, cores_used, removed
):
    settings.RESIZE_DRAIN_SECONDS = 0
    cluster = running(alice, "spark", size=2, mem=1024)
    leaving = workers_of(cluster)[1]
    status = [{"host": w.hostname, "state": "ALIVE", "cores_used": 0} for w in workers_of(cluster)]
    status[1]["cores_used"] = cores_used
    fake_nodes.exec_results["spark-admin"] = (0, json.dumps(status))
    services.request_resize(cluster.id, 1)
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert (len(workers_of(cluster)) == 1) is removed
    if not removed:
        failed = cluster.events.get(message__startswith="resize failed")
        assert f"executors still run on {leaving.hostname}" in failed.message


# ------------------------------------------------------------------ Cassandra


NTS = "org.apache.cassandra.locator.NetworkTopologyStrategy"
SIMPLE = "org.apache.cassandra.locator.SimpleStrategy"
STATUS_HEADER = """Datacenter: dc1
===============
Status=Up/Down
|/ State=Normal/Leaving/Joining/Moving
--  Address     Load        Tokens  Owns (effective)  Host ID                               Rack
"""


def host_id(address: str) -> str:
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_DNS, address))


@dataclass
class Member:
    host: str
    state: str  # nodetool's UN, UJ, UL, DN
    polls: int = 0  # answers of nodetool status left in this state


class FakeRing:
    """Cassandra's ring behind the fake nodes' containers, as nodetool and cqlsh in them
    answer: a launch's nodes are UN at once; a node started with CASSANDRA_AUTO_BOOTSTRAP is
    UJ for `join_polls` answers of nodetool status, then UN; a decommissioned one UL for
    `leave_polls` answers, then gone. `log` is what happened, in order."""

    def __init__(self) -> None:
        self.members: dict[str, Member] = {}  # by address
        self.keyspaces: dict[str, dict[str, str]] = {
            "system": {"class": "org.apache.cassandra.locator.LocalStrategy"},
            "system_schema": {"class": "org.apache.cassandra.locator.LocalStrategy"},
            "system_auth": {"class": NTS, "dc1": "2"},
            "system_distributed": {"class": SIMPLE, "replication_factor": "3"},
            "system_traces": {"class": SIMPLE, "replication_factor": "2"},
        }
        self.join_polls = 2
        self.leave_polls = 2
        self.crash: set[str] = set()  # hostnames whose container exits as it starts
        self.stream_fails: set[str] = set()  # hostnames whose decommission fails, left UL
        self.outcomes: dict[str, tuple[int, str]] = {}  # address -> decommission's exit
        self.statements: list[str] = []
        self.log: list[tuple[str, str]] = []

    def status(self) -> str:
        lines = [
            f"{state}  {address}  1.2 MiB  16  50.0%  {host_id(address)}  rack1"
            for address, state in sorted((a, m.state) for a, m in self.members.items())
        ]
        for address, member in list(self.members.items()):
            host, state = member.host, member.state
            if state == "UJ" and ("UJ", host) not in self.log:
                self.log.append(("UJ", host))
            if member.polls > 0:
                member.polls -= 1
            elif state == "UJ":
                member.state = "UN"
            elif state == "UL":
                del self.members[address]
                self.outcomes[address] = (0, "")
                self.log.append(("left", host))
            if state == "UN" and ("UJ", host) in self.log and ("UN", host) not in self.log:
                self.log.append(("UN", host))
        return STATUS_HEADER + "\n".join(lines) + "\n"

    def cql(self, statement: str) -> tuple[int, str]:
        import ast
        import re

        self.statements.append(statement)
        if statement.startswith("SELECT JSON keyspace_name, replication"):
            rows = [
                json.dumps({"keyspace_name": name, "replication": replication})
                for name, replication in self.keyspaces.items()
            ]
            table = "\n".join(f" {row}" for row in rows)
            return 0, f"\n [json]\n{'-' * 60}\n{table}\n\n({len(rows)} rows)\n"
        altered = re.match(r"ALTER KEYSPACE (\w+) WITH replication = (\{.*\})$", statement)
        if altered:
            replication = ast.literal_eval(altered.group(2))
            self.keyspaces[altered.group(1)] = {k: str(v) for k, v in replication.items()}
        return 0, ""

    def exec(self, host: str, address: str, argv: list[str]) -> tuple[int, str]:
        if argv[:2] == ["nodetool", "status"]:
            return 0, self.status()
        if argv[:2] in (["nodetool", "cleanup"], ["nodetool", "repair"]):
            self.log.append((argv[1], host))
            return 0, ""
        if argv[:2] == ["nodetool", "removenode"]:
            gone = next(a for a in self.members if host_id(a) == argv[2])
            self.log.append(("removenode", self.members.pop(gone).host))
            return 0, ""
        if argv[0] == "cqlsh":
            return self.cql(argv[-1])
        if argv == ["cassandra-admin", "decommission"]:
            self.log.append(("decommission", host))
            self.outcomes.pop(address, None)
            if host in self.stream_fails:
                self.members[address] = Member(host, "UL", 10**6)
                self.outcomes[address] = (1, "error: Stream failed")
            else:
                self.members[address] = Member(host, "UL", self.leave_polls)
            return 0, '{"started": true}'
        if argv == ["cassandra-admin", "decommission-status"]:
            code, output = self.outcomes.get(address, (None, ""))
            return 0, json.dumps({"running": code is None, "exit": code, "log": output})
        return 0, ""  # /etc/hosts, the product's checks


@pytest.fixture
def ring(fake_nodes, monkeypatch, settings) -> FakeRing:
    from apps.nodes.errors import NodeError
    from apps.nodes.fake import FakeNodeClient

    settings.RESIZE_POLL_SECONDS = 0
    fake = FakeRing()
    ensure_running, stop, start = (
        FakeNodeClient.ensure_running,
        FakeNodeClient.stop,
        FakeNodeClient.start,
    )

    def exec_(self, container, argv, timeout):
        found = self._get("exec", container)
        if found.state != "running":
            raise NodeError(self.name, f"exec in {container}: container is not running")
        return fake.exec(found.spec.hostname, found.spec.address, list(argv))

    def ensure_running_(self, spec):
        outcome = ensure_running(self, spec)
        if spec.environment.get("CASSANDRA_AUTO_BOOTSTRAP") == "true":
            fake.log.append(("start", spec.hostname))
            if spec.hostname in fake.crash:
                container = self.nodes.on(self.name)[spec.name]
                container.state, container.log = "exited", "ERROR Unable to bootstrap"
            else:
                fake.members[spec.address] = Member(spec.hostname, "UJ", fake.join_polls)
        else:  # a launch: a brand-new ring
            fake.members.setdefault(spec.address, Member(spec.hostname, "UN"))
        return outcome

    def member(self, name):
        found = self.nodes.on(self.name).get(name)
        return fake.members.get(found.spec.address) if found and found.spec else None

    def stop_(self, name, timeout=None):
        stop(self, name, timeout)
        if (found := member(self, name)) is not None:
            found.state, found.polls = "DN", 0

    def start_(self, name):
        start(self, name)
        if (found := member(self, name)) is not None:
            found.state, found.polls = "UN", 0
            fake.log.append(("restart", found.host))

    monkeypatch.setattr(FakeNodeClient, "exec", exec_)
    monkeypatch.setattr(FakeNodeClient, "ensure_running", ensure_running_)
    monkeypatch.setattr(FakeNodeClient, "stop", stop_)
    monkeypatch.setattr(FakeNodeClient, "start", start_)
    return fake


def cassandra(owner, nodes: int) -> Cluster:
    return running(owner, "cassandra", size=nodes, mem=1024)


def hostnames(cluster: Cluster, role: str = "node") -> list[str]:
    return [i.hostname for i in workers_of(cluster, role)]


def test_cassandra_nodes_join_one_at_a_time_then_the_old_ones_clean_up(
    ring, fake_nodes, pool, alice, catalog
):
    cluster = cassandra(alice, 1)
    seed, old = hostnames(cluster, "seed")[0], hostnames(cluster)[0]
    assert services.request_resize(cluster.id, 3, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING

    first, second = hostnames(cluster)[1:]
    assert [i.state for i in workers_of(cluster, "node")] == [Instance.State.RUNNING] * 3
    # Each new node starts only once the one before is UN; the older ones clean up after.
    joins = [e for e in ring.log if e[0] in ("start", "UJ", "UN")]
    assert joins == [
        ("start", first),
        ("UJ", first),
        ("UN", first),
        ("start", second),
        ("UJ", second),
        ("UN", second),
    ]
    cleanups = [host for what, host in ring.log if what == "cleanup"]
    assert sorted(cleanups) == sorted([seed, old])
    assert ring.log.index(("cleanup", cleanups[0])) > ring.log.index(("UN", second))
    # Only new nodes bootstrap, on emptied disks; the seeds are unchanged.
    specs = [c.spec for node in pool for c in fake_nodes.on(node.name).values() if c.spec]
    bootstrapping = {s.hostname for s in specs if "CASSANDRA_AUTO_BOOTSTRAP" in s.environment}
    assert bootstrapping == {first, second}
    assert all(s.environment["CASSANDRA_SEEDS"] == seed for s in specs)
    wipes = [c for c in fake_nodes.calls if c[1] == "run_helper" and "rm -rf /wipe" in c[2]]
    assert len(wipes) == 2
    # system_auth follows the ring to 3 copies, repaired on every node.
    assert ring.keyspaces["system_auth"] == {"class": "NetworkTopologyStrategy", "dc1": "3"}
    assert sorted(h for what, h in ring.log if what == "repair") == sorted(
        [seed, old, first, second]
    )
    messages = list(cluster.events.values_list("message", flat=True))
    assert f"{first} is joining the ring (UJ): streaming its share of the data" in messages
    assert f"{second} joined the ring (UN)" in messages
    assert any(m.startswith(f"nodetool cleanup on {seed}") for m in messages)
    assert cluster.events.filter(message="running: resized to 3 nodes").exists()


@pytest.mark.parametrize(
    "replication",
    [{"class": SIMPLE, "replication_factor": "3"}, {"class": NTS, "dc1": "3"}],
    ids=["SimpleStrategy", "NetworkTopologyStrategy"],
)
def test_a_cassandra_shrink_below_a_keyspace_replication_is_refused_before_anything_changes(
    ring, fake_nodes, pool, alice, catalog, replication
):
    cluster = cassandra(alice, 2)
    ring.keyspaces["shop"] = replication
    ring.keyspaces["logs"] = {"class": NTS, "dc1": "2"}
    assert services.request_resize(cluster.id, 1, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING

    failed = cluster.events.get(message__startswith="resize failed:")
    assert failed.message == (
        "resize failed: keyspace shop has replication factor 3: at least 3 Cassandra nodes "
        "(seeds included) must stay, and this shrink would leave 2; lower its replication "
        "(ALTER KEYSPACE) or keep more nodes"
    )
    assert len(workers_of(cluster, "node")) == 2
    assert not [e for e in ring.log if e[0] == "decommission"]
    assert not [s for s in ring.statements if s.startswith("ALTER")]
    assert len(ring.members) == 3  # the ring as it was
    cluster.refresh_from_db()
    assert cluster.resize_to is None
    assert cluster.events.filter(
        message__startswith="running: resize failed, size unchanged: keyspace shop"
    ).exists()


def test_cassandra_nodes_leave_by_decommission_one_at_a_time_newest_first(
    ring, fake_nodes, pool, alice, catalog
):
    cluster = cassandra(alice, 3)
    ring.keyspaces["system_auth"] = {"class": NTS, "dc1": "3"}
    ring.keyspaces["shop"] = {"class": NTS, "dc1": "2"}
    seed = hostnames(cluster, "seed")
    kept, middle, newest = workers_of(cluster, "node")
    assert services.request_resize(cluster.id, 1, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING

    leaving = [e for e in ring.log if e[0] in ("decommission", "left")]
    assert leaving == [
        ("decommission", newest.hostname),
        ("left", newest.hostname),
        ("decommission", middle.hostname),
        ("left", middle.hostname),
    ]
    # Cassandra's own keyspaces are lowered to the two nodes that stay (it refuses to
    # decommission below them); the user's keyspace needs no change.
    assert ring.keyspaces["system_distributed"] == {"class": "NetworkTopologyStrategy", "dc1": "2"}
    assert ring.keyspaces["system_auth"] == {"class": "NetworkTopologyStrategy", "dc1": "2"}
    assert ring.keyspaces["system_traces"]["replication_factor"] == "2"
    assert ring.keyspaces["shop"] == {"class": NTS, "dc1": "2"}
    assert hostnames(cluster) == [kept.hostname] and hostnames(cluster, "seed") == seed
    for gone in (middle, newest):
        gone.refresh_from_db()
        assert gone.state == Instance.State.RELEASED and not gone.active
        assert not DiskAllocation.objects.filter(instance=gone, active=True).exists()
        assert DiskAllocation.objects.filter(instance=gone, data_kept=True).exists()
        assert not Address.objects.filter(id=gone.address_id, held=True).exists()
    running_containers = sum(len(fake_nodes.running(n.name)) for n in pool)
    assert running_containers == 2
    messages = list(cluster.events.values_list("message", flat=True))
    assert f"{newest.hostname} is leaving the ring (UL): streaming its data to the others" in (
        messages
    )
    assert f"{middle.hostname} left the ring (decommissioned)" in messages
    assert cluster.events.filter(message__contains="resized to 1 nodes").exists()


def test_a_cassandra_node_that_does_not_join_is_given_back_and_the_joined_one_stays(
    ring, fake_nodes, pool, alice, catalog
):
    cluster = cassandra(alice, 1)
    seed, old = hostnames(cluster, "seed")[0], hostnames(cluster)[0]
    services.request_resize(cluster.id, 3, actor=alice)
    failing = Instance.objects.get(cluster=cluster, role="node", index=2)
    ring.crash.add(failing.hostname)
    assert operations.run("resize", cluster.id) == S.RUNNING

    joined = Instance.objects.get(cluster=cluster, role="node", index=1)
    assert hostnames(cluster) == [old, joined.hostname]
    assert joined.state == Instance.State.RUNNING
    failing.refresh_from_db()
    assert failing.state == Instance.State.RELEASED and not failing.active
    allocations = DiskAllocation.objects.filter(instance=failing)
    assert allocations.exists() and not allocations.filter(active=True).exists()
    assert not allocations.filter(data_kept=True).exists()  # it never held any data
    assert not Address.objects.filter(id=failing.address_id, held=True).exists()
    assert not any(failing.hostname in fake_nodes.names(n.name) for n in pool)
    released = cluster.events.filter(message__startswith="released 1 instances")
    assert released.count() == 1  # given back once
    # The older nodes gave ranges to the one that joined: they still clean up.
    assert sorted(h for what, h in ring.log if what == "cleanup") == sorted([seed, old])
    failed = cluster.events.get(message__startswith="resize failed:")
    assert failed.message == (
        f"resize failed: {failing.hostname} stopped while joining the ring: ERROR Unable to "
        f"bootstrap; {joined.hostname} joined and stays"
    )
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING and cluster.resize_to is None
    assert cluster.events.filter(
        message__startswith="running: resize failed, now 2 nodes (from 1)"
    ).exists()


def test_a_failed_cassandra_decommission_puts_the_node_back_and_keeps_what_left(
    ring, fake_nodes, pool, alice, catalog
):
    cluster = cassandra(alice, 3)
    kept, middle, newest = workers_of(cluster, "node")
    ring.stream_fails.add(middle.hostname)
    services.request_resize(cluster.id, 1, actor=alice)
    assert operations.run("resize", cluster.id) == S.RUNNING

    assert hostnames(cluster) == [kept.hostname, middle.hostname]
    newest.refresh_from_db()
    assert newest.state == Instance.State.RELEASED  # it had left the ring: it is not put back
    assert ("restart", middle.hostname) in ring.log  # a restart ends a stuck decommission
    assert ring.members[middle.address.ip].state == "UN"
    failed = cluster.events.get(message__startswith="resize failed:")
    assert failed.message == (
        f"resize failed: nodetool decommission on {middle.hostname} failed: error: Stream "
        f"failed; {middle.hostname} was restarted and is back in the ring (UN)"
    )
    assert cluster.events.filter(
        message__startswith="running: resize failed, now 2 nodes (from 3)"
    ).exists()
    assert sum(len(fake_nodes.running(n.name)) for n in pool) == 3


def test_a_cassandra_resize_waits_for_every_node_to_be_up(ring, fake_nodes, pool, alice, catalog):
    cluster = cassandra(alice, 2)
    down = workers_of(cluster, "node")[0]
    ring.members[down.address.ip].state = "DN"
    services.request_resize(cluster.id, 3, actor=alice)
    assert operations.run("resize", cluster.id) == S.RUNNING
    failed = cluster.events.get(message__startswith="resize failed:")
    assert f"{down.hostname} is DN: every node must be up and normal" in failed.message
    assert not [e for e in ring.log if e[0] == "start"]
    assert len(workers_of(cluster, "node")) == 2
    assert not cluster.instances.filter(active=True, state=Instance.State.RESERVED).exists()


def test_nodetool_status_is_read_with_joining_nodes_and_ports():
    from apps.products.cassandra.ring import parse_ring

    output = STATUS_HEADER + (
        "UN  10.0.0.2:7000  97.09 KiB  16  66.7%  11e24d4a-a85f-4429-b701-3865c80bf887  rack1\n"
        "UJ  10.0.0.3       ?          16  ?      008e6938-3934-4ac2-9d03-2cd070f1cf1f  rack1\n"
    )
    ring = parse_ring(output)
    assert ring["10.0.0.2"].state == "UN" and ring["10.0.0.2"].datacenter == "dc1"
    assert ring["10.0.0.3"].host_id == "008e6938-3934-4ac2-9d03-2cd070f1cf1f"


@pytest.mark.parametrize(
    ("replication", "copies"),
    [
        ({"class": SIMPLE, "replication_factor": "3"}, 3),
        ({"class": "SimpleStrategy", "replication_factor": "2/1"}, 2),  # transient replicas
        ({"class": NTS, "dc1": "2", "dc2": "4"}, 4),
        ({"class": "org.apache.cassandra.locator.LocalStrategy"}, 0),
    ],
)
def test_a_keyspace_replication_factor_is_read_from_either_strategy(replication, copies):
    from apps.products.cassandra.rules import replication_factor, ring_shrink_refusal

    assert replication_factor(replication) == copies
    # Two nodes staying: only a user's keyspace keeping more copies refuses; Cassandra's own
    # (lowered by the worker) never does.
    refusal = ring_shrink_refusal({"system_distributed": 3, "k": copies}, 2)
    assert (refusal is None) == (copies <= 2)
    if refusal:
        assert refusal.startswith(f"keyspace k has replication factor {copies}: at least")


def test_a_version_without_a_plugin_refuses_to_resize_a_role_that_keeps_state(
    fake_nodes, pool, alice, catalog
):
    """An admin's copy of the demo version that names no plugin (as the CESGA import makes
    them) gets the generic one: its workers keep data on disks, so no shrink (nor grow) runs
    without a drain; before plugins, a product missing from the drain table shrank as is."""
    demo = version("demo")
    bare = ProductVersion.objects.create(
        product=demo.product,
        version="no-plugin",
        **{f: getattr(demo, f) for f in ("image", "disk_kind", "roles", "options_schema")},
        **{f: getattr(demo, f) for f in ("ports", "environment", "configure", "capabilities")},
    )
    assert bare.plugin == ""
    spec = resolve(bare, {"size": 2, "mem": 64})
    cluster = services.create_cluster(alice, bare, "bare", spec.instances, {"size": 2, "mem": 64})
    reserve(cluster.id)
    assert operations.run("launch", cluster.id) == S.RUNNING
    with pytest.raises(ResizeRefused, match=r"workers keep data on their disks.*cannot be resized"):
        services.request_resize(cluster.id, 1, actor=alice)
    with pytest.raises(ResizeRefused, match="generic"):
        services.request_resize(cluster.id, 3, actor=alice)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING and len(workers_of(cluster)) == 2
    # The same shape under the demo plugin (the shipped version) shrinks.
    assert version("demo").plugin == "demo"
