"""Cassandra's resize on a fake ring (nodetool, cqlsh and cassandra-admin answered as a
ring would): nodes join one at a time, leave by decommission newest first, and a shrink
below a keyspace's replication is refused before anything changes. For real:
test_cassandra_lab.py."""

import json
from dataclasses import dataclass

import pytest

from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.inventory.models import Address
from workers import operations
from workers.tests.fake_launch import running, workers_of

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


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
