"""Kafka on the real lab, driven by a real worker: it launches (one combined controller and one
broker), passes its produce-and-consume smoke test, grows by a broker that registers, keeps
every message of a replicated topic through a shrink by one (its replicas moved off the
leaving broker first), and refuses a shrink below that topic's replication factor."""

import json

import pytest
from django.core.management import call_command

from apps import nodes
from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.waiting import wait_for
from apps.lab.management.commands.seed_demo import DEMO_QUOTA

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State
READY_SECONDS = 300  # launch to running on 2 shared cores, the health check included
RESIZE_SECONDS = 600
TOPIC, MESSAGES = "kept", 2000


def run(member: Instance, *argv: str, timeout: float = 300) -> str:
    assert member.node is not None, "placed on a node"
    code, output = nodes.client(member.node).exec(member.container_id, list(argv), timeout)
    assert code == 0, output[-2000:]
    return output


def admin(member: Instance, *argv: str) -> dict:
    return json.loads(run(member, "kafka-admin", *argv).strip().splitlines()[-1])


def member_of(cluster: Cluster, role: str, index: int = 0) -> Instance:
    return cluster.instances.select_related("node").get(role=role, index=index, active=True)


def resized(cluster: Cluster, brokers: int) -> Cluster:
    mark = cluster.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_resize(cluster.id, brokers) == S.RESIZING
    done = wait_for(cluster.id, S.RUNNING, seconds=RESIZE_SECONDS)
    failed = done.events.filter(id__gt=mark, message__startswith="resize failed")
    assert not failed.exists(), [e.message for e in failed]
    assert done.instances.filter(role="broker", active=True).count() == brokers
    return done


@pytest.mark.timeout(1500)  # a launch, the smoke test, a grow, a shrink and a refused shrink
def test_kafka_grows_and_shrinks_by_one_keeping_every_message(dispatching, lab_cleanup, alice):
    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=alice, defaults=DEMO_QUOTA)
    version = ProductVersion.objects.get(product__name="kafka", version="4.3")
    options = {"controllers": 1, "size": 1, "mem": 1024, "heap": "256M"}
    launched = services.launch(alice, version, "kafka-resize", options)
    cluster = wait_for(launched.id, S.RUNNING, seconds=READY_SECONDS)
    controller = member_of(cluster, "controller")
    assert admin(controller, "brokers") == {"brokers": [1, 100]}
    assert admin(controller, "quorum")["leader"] == 1

    smoke = run(controller, "kafka-smoke", "--messages", "200")
    assert "OK: 200 messages of platter-smoke-" in smoke, smoke

    grown = resized(cluster, 2)
    assert admin(controller, "brokers") == {"brokers": [1, 100, 101]}
    produced = run(
        member_of(grown, "broker", 1),
        "kafka-smoke", "produce", "--topic", TOPIC, "--messages", str(MESSAGES),
        "--replication-factor", "2", "--partitions", "6",
    )  # fmt: skip
    assert f"OK: {MESSAGES} messages produced to {TOPIC}" in produced, produced
    topics = {t["name"]: t for t in admin(controller, "topics")["topics"]}
    assert topics[TOPIC]["replication_factor"] == 2
    assert topics[TOPIC]["replicas_on"].get("101", 0) > 0  # the shrink has replicas to move

    shrunk = resized(grown, 1)
    messages = list(shrunk.events.values_list("message", flat=True))
    assert any("partitions moved off broker-1 (broker 101)" in m for m in messages), messages
    assert admin(controller, "brokers") == {"brokers": [1, 100]}
    topics = {t["name"]: t for t in admin(controller, "topics")["topics"]}
    assert "101" not in topics[TOPIC]["replicas_on"], topics[TOPIC]
    consumed = run(
        member_of(shrunk, "broker", 0),
        "kafka-smoke", "consume", "--topic", TOPIC, "--messages", str(MESSAGES),
    )  # fmt: skip
    assert f"OK: {MESSAGES} messages of {TOPIC} (6 partitions, RF 2)" in consumed, consumed

    # RF 2 needs two brokers: a shrink to the controller alone is refused before anything moves.
    mark = shrunk.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_resize(cluster.id, 0) == S.RESIZING
    refused = wait_for(cluster.id, S.RUNNING, seconds=300)
    failed = refused.events.get(id__gt=mark, message__startswith="resize failed")
    assert f"topic {TOPIC} has replication factor 2" in failed.message, failed.message
    assert "would leave 1" in failed.message
    assert refused.instances.filter(role="broker", active=True).count() == 1
    assert admin(controller, "brokers") == {"brokers": [1, 100]}

    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, S.DESTROYED, seconds=120)
