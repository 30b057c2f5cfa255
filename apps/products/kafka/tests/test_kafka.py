"""Kafka above the node boundary: the catalog entry, the shrink rule (a topic's replication
factor above the brokers that stay is refused, naming it) and a resize on fake nodes, whose
kafka-admin answers as the image's would. The image's kafka-admin plans the moves itself:
its plan is tested here from the script. The product joining and leaving for real:
test_kafka_lab.py."""

import json
from pathlib import Path
from types import ModuleType

import pytest

from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.clusters import services
from apps.clusters.connection import connection_details
from apps.clusters.container_specs import container_name
from apps.clusters.models import Cluster, Instance
from apps.clusters.reservation import reserve
from apps.nodes.fake import FakeNodes
from apps.products.base import Member, ResizeFailed, answer_of
from apps.products.kafka.plugin import KafkaPlugin
from apps.products.kafka.rules import broker_id, shrink_refusal
from apps.products.registry import plugin_for
from workers import operations

S = Cluster.State
ADMIN_SCRIPT = (
    Path(__file__).resolve().parents[4] / "deploy/images/kafka/rootfs/opt/platter/bin/kafka-admin"
)


def kafka_version() -> ProductVersion:
    return ProductVersion.objects.get(product__name="kafka", version="4.3")


# ------------------------------------------------------------------ the catalog entry


def test_the_catalog_offers_kafka_with_three_combined_brokers_by_default(catalog):
    version = kafka_version()
    assert version.plugin == "kafka"
    assert isinstance(plugin_for(version), KafkaPlugin)
    spec = resolve(version, {})
    shape = sorted((i.role, i.cores, i.memory_mb, i.disks) for i in spec.instances)
    assert shape == [("controller", 1, 1536, 1)] * 3  # no broker-only node unless asked
    grown = resolve(version, {"size": 2, "controllers": 1})
    assert sorted(i.role for i in grown.instances) == ["broker", "broker", "controller"]


def test_every_kafka_port_says_what_it_allows_and_clients_get_sasl_strings(catalog):
    ports = kafka_version().definition.ports
    assert {(p.role, p.port) for p in ports} >= {
        ("controller", 9092),
        ("broker", 9092),
        ("controller", 9093),
    }
    assert all(p.allows for p in ports)
    connect = " ".join(s for p in ports for s in p.connect)
    assert "bootstrap.servers={{endpoints}}" in connect
    assert "SASL_PLAINTEXT" in connect and "SCRAM-SHA-256" in connect
    assert "{{user}}" in connect and "{{password}}" in connect


def test_only_broker_only_nodes_resize(catalog):
    plugin = plugin_for(kafka_version())
    assert plugin.resizable_roles({"controller": True, "broker": True}) == ["broker"]
    assert plugin.job_kinds == ()
    assert "reassign" in plugin.drain_words


# ------------------------------------------------------------------ the rules


def member(role: str, index: int) -> Member:
    return Member(index, role, index, f"k-{role}-{index}", f"10.0.0.{index}", f"c-{index}")


def test_broker_ids_are_those_kafka_start_gives():
    assert [broker_id(member("controller", i)) for i in range(3)] == [1, 2, 3]
    assert [broker_id(member("broker", i)) for i in range(2)] == [100, 101]
    start = (ADMIN_SCRIPT.parent / "kafka-start").read_text()
    assert "controller) node_id=$((index + 1))" in start
    assert "broker) node_id=$((100 + index))" in start


def topic(name: str, factor: int) -> dict:
    return {"name": name, "partitions": 3, "replication_factor": factor, "replicas_on": {}}


def test_a_shrink_below_a_topics_replication_factor_is_refused_naming_the_topic():
    topics = [topic("__consumer_offsets", 1), topic("orders", 3), topic("clicks", 2)]
    assert shrink_refusal(topics, 3) is None
    refusal = shrink_refusal(topics, 2)
    assert refusal is not None
    assert refusal.startswith("topic orders has replication factor 3: at least 3 Kafka brokers")
    assert "would leave 2" in refusal
    assert "clicks" in (shrink_refusal([topic("clicks", 2)], 1) or "")


def test_kafka_admins_answer_is_found_after_jvm_warnings():
    assert answer_of('WARNING: something\n{"topics": []}\n', "kafka-admin") == {"topics": []}
    with pytest.raises(ResizeFailed, match="kafka-admin gave no answer: Exception in thread"):
        answer_of("Exception in thread main", "kafka-admin")


# ------------------------------------------------------------------ kafka-admin's plan


def kafka_admin() -> ModuleType:
    """The image's script as a module (compiled here: no bytecode left beside it)."""
    module = ModuleType("kafka_admin")
    exec(compile(ADMIN_SCRIPT.read_text(), str(ADMIN_SCRIPT), "exec"), module.__dict__)  # noqa: S102
    return module


def test_the_admin_plan_moves_each_replica_off_the_leaving_broker_to_the_least_loaded():
    admin = kafka_admin()
    parts = [
        {"topic": "t", "partition": 0, "replicas": [101, 1]},
        {"topic": "t", "partition": 1, "replicas": [1, 100]},
        {"topic": "t", "partition": 2, "replicas": [100, 101]},
        {"topic": "u", "partition": 0, "replicas": [101]},
    ]
    moves = admin.plan(parts, {101}, [1, 100])
    # Staying replicas keep their order (one of them leads); each leaving one is replaced by
    # the staying broker holding fewest replicas so far (1 and 100 hold 2 each at first).
    assert moves == [
        {"topic": "t", "partition": 0, "replicas": [1, 100]},
        {"topic": "t", "partition": 2, "replicas": [100, 1]},
        {"topic": "u", "partition": 0, "replicas": [1]},
    ]
    after = {
        **{(p["topic"], p["partition"]): p["replicas"] for p in parts},
        **{(m["topic"], m["partition"]): m["replicas"] for m in moves},
    }
    held = [sum(b in r for r in after.values()) for b in (1, 100)]
    assert held == [4, 3] and all(101 not in r for r in after.values())


def test_the_admin_plan_refuses_a_topic_with_more_replicas_than_brokers_stay():
    admin = kafka_admin()
    parts = [{"topic": "orders", "partition": 0, "replicas": [1, 100, 101]}]
    with pytest.raises(admin.Refused, match="topic orders has replication factor 3, more than"):
        admin.plan(parts, {101}, [1, 100])


def test_the_admin_reads_kafkas_topic_description():
    admin = kafka_admin()
    described = (
        "Topic: keep\tTopicId: x\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: \n"
        "\tTopic: keep\tPartition: 0\tLeader: 1\tReplicas: 1,100\tIsr: 1,100\tElr: \n"
        "\tTopic: keep\tPartition: 1\tLeader: none\tReplicas: 100,1\tIsr: \tElr: \n"
    )
    parts = admin.parse_partitions(described)
    assert parts[1] == {"topic": "keep", "partition": 1, "leader": None, "replicas": [100, 1]}
    assert admin.summarize(parts) == [
        {
            "name": "keep",
            "partitions": 2,
            "replication_factor": 2,
            "internal": False,
            "replicas_on": {"1": 2, "100": 2},
        }
    ]


# ------------------------------------------------------------------ a resize on fake nodes


class FakeKafka:
    """kafka-admin as the image answers it, over a set of topics."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics  # name -> replication factor
        self.moved: list[list[str]] = []
        self.unregistered: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str]:
        command = argv[1]
        listed = [
            {
                "name": name,
                "partitions": 3,
                "replication_factor": factor,
                "internal": False,
                "replicas_on": {"1": 3, "100": 2, "101": 2},
            }
            for name, factor in self.topics.items()
        ]
        if command == "topics":
            return 0, "OpenJDK warning on stderr\n" + json.dumps({"topics": listed})
        options = argv.index("--timeout") if "--timeout" in argv else len(argv)
        brokers = argv[2:options]
        if command == "reassign-off":
            self.moved.append(brokers)
            answer = {"brokers": brokers, "moved": 4, "topics": ["keep"], "seconds": 1.5}
            return 0, json.dumps({**answer, "done": True})
        if command == "unregister":
            self.unregistered.append(brokers)
            return 0, json.dumps({"unregistered": brokers, "brokers": []})
        if command == "drain-status":
            left = {b: 0 if brokers in self.moved else 2 for b in brokers}
            return 0, json.dumps({"replicas_left": left, "done": brokers in self.moved})
        return 2, "unknown"


def running_kafka(owner, brokers: int) -> Cluster:
    options = {"size": brokers, "controllers": 1, "mem": 1024}
    spec = resolve(kafka_version(), options)
    cluster = services.create_cluster(owner, kafka_version(), "k", spec.instances, options)
    reserve(cluster.id)
    assert operations.run("launch", cluster.id) == S.RUNNING
    return cluster


def brokers_of(cluster: Cluster) -> list[str]:
    found = cluster.instances.filter(role="broker", active=True).order_by("index")
    return [i.hostname for i in found]


def admin_calls(fake: FakeNodes) -> list[list[str]]:
    return [argv[1:] for argv in fake.execs if argv[0] == "kafka-admin"]


@pytest.mark.django_db(transaction=True)
def test_a_shrink_moves_the_leaving_brokers_replicas_before_it_stops(
    fake_nodes, pool, alice, catalog, settings
):
    settings.RESIZE_DRAIN_SECONDS = 300
    kafka = FakeKafka({"keep": 2})
    fake_nodes.exec_results["kafka-admin"] = kafka
    cluster = running_kafka(alice, 2)
    assert services.request_resize(cluster.id, 1, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING

    # Asked of the controller, in this order: the topics, the move off broker 101 (the newest
    # broker-only node), that none is left on it, and once it stopped, to forget it.
    assert admin_calls(fake_nodes) == [
        ["topics"],
        ["reassign-off", "101", "--timeout", "300"],
        ["drain-status", "101"],
        ["unregister", "101"],
    ]
    # Stopped before it is forgotten (a running broker registers again): the unregister is
    # the last exec, after broker-1's stop.
    calls = [(method, target) for _, method, target in fake_nodes.calls]
    stopped = calls.index(("stop", container_name(cluster.id, "broker", 1)))
    assert stopped < max(i for i, (method, _) in enumerate(calls) if method == "exec")
    assert brokers_of(cluster) == ["broker-0"]
    assert not cluster.instances.filter(hostname="broker-1", active=True).exists()
    messages = list(cluster.events.values_list("message", flat=True))
    assert any("moving 2 partition replicas off broker-1 (broker 101)" in m for m in messages)
    assert any(m.startswith("4 partitions moved off broker-1 (broker 101)") for m in messages)
    assert "broker-1 (broker 101) stopped and unregistered from the cluster" in messages


@pytest.mark.django_db(transaction=True)
def test_a_shrink_below_a_topics_replication_is_refused_before_anything_moves(
    fake_nodes, pool, alice, catalog
):
    kafka = FakeKafka({"keep": 2, "orders": 3})
    fake_nodes.exec_results["kafka-admin"] = kafka
    cluster = running_kafka(alice, 2)
    assert services.request_resize(cluster.id, 1, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING

    failed = cluster.events.get(message__startswith="resize failed:")
    assert failed.message.startswith(
        "resize failed: topic orders has replication factor 3: at least 3 Kafka brokers"
    )
    assert admin_calls(fake_nodes) == [["topics"]]  # nothing moved
    assert kafka.moved == []
    assert brokers_of(cluster) == ["broker-0", "broker-1"]
    cluster.refresh_from_db()
    assert cluster.resize_to is None


@pytest.mark.django_db(transaction=True)
def test_a_grow_starts_a_broker_and_waits_until_every_broker_is_registered(
    fake_nodes, pool, alice, catalog
):
    fake_nodes.exec_results["kafka-admin"] = FakeKafka({})
    cluster = running_kafka(alice, 1)
    assert services.request_resize(cluster.id, 2, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING

    assert brokers_of(cluster) == ["broker-0", "broker-1"]
    new = cluster.instances.get(hostname="broker-1")
    assert new.state == Instance.State.RUNNING
    health = [" ".join(argv) for argv in fake_nodes.execs if "kafka-health" in " ".join(argv)]
    assert health[-1].endswith("kafka-health --timeout 240 --expect $(( 1 + 2 ))")
    assert admin_calls(fake_nodes) == []  # nothing drains on a grow


@pytest.mark.django_db(transaction=True)
def test_a_cluster_launched_with_no_broker_only_node_grows_one_as_a_launch_makes_it(
    fake_nodes, pool, alice, catalog
):
    fake_nodes.exec_results["kafka-admin"] = FakeKafka({})
    cluster = running_kafka(alice, 0)
    assert brokers_of(cluster) == []
    assert services.request_resize(cluster.id, 1, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING

    assert brokers_of(cluster) == ["broker-0"]
    (made,) = [
        i
        for i in resolve(kafka_version(), {"size": 1, "controllers": 1, "mem": 1024}).instances
        if i.role == "broker"
    ]
    new = cluster.instances.get(hostname="broker-0")
    assert (new.cores, new.memory_mb, new.disks, new.disk_kind, new.image) == (
        made.cores,
        made.memory_mb,
        made.disks,
        made.disk_kind,
        made.image,
    )


@pytest.mark.django_db(transaction=True)
def test_the_owner_gets_every_brokers_address_and_the_clusters_sasl_login(
    fake_nodes, pool, alice, catalog
):
    fake_nodes.exec_results["kafka-admin"] = FakeKafka({})
    cluster = running_kafka(alice, 1)
    details = connection_details(cluster, alice)
    assert details.credentials is not None
    user, password = details.credentials["username"], details.credentials["password"]
    values = [s.value for s in details.strings]
    addresses = sorted(i.address.ip for i in cluster.instances.select_related("address"))
    servers = values[0].removeprefix("bootstrap.servers=").split(",")
    assert sorted(s.removesuffix(":9092") for s in servers) == addresses  # controller and broker
    assert f'username="{user}" password="{password}";' in values[1]
    assert "security.protocol=SASL_PLAINTEXT sasl.mechanism=SCRAM-SHA-256" in values[1]
    assert f"-X sasl.username={user} -X sasl.password={password}" in values[2]
