"""Autoscaling (apps/clusters/autoscale.py, workers/autoscale.py) above the node boundary: the
policy's arithmetic on recorded signals (factors, cooldown, minimum change, bounds), the fields
a policy is refused for, and passes over fake nodes whose products report pending work:
decisions carried out through the resize path, or refused by the quota, capacity or the
product's floor and said."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import Quota
from apps.clusters import autoscale
from apps.clusters.models import Cluster, ClusterEvent, LoadSample, ScalingPolicy
from apps.products.base import Load
from workers import autoscale as passes
from workers.tests.fake_launch import running

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def policy(**fields) -> ScalingPolicy:
    given = {"min_workers": 1, "max_workers": 5, "cooldown_seconds": 120, **fields}
    return ScalingPolicy(**given)


def cores(pending: float, available: float = 0, per_worker: float = 2) -> Load:
    return Load(pending, available, per_worker, "cores")


@pytest.mark.parametrize(
    ("fields", "samples", "current", "target", "words"),
    [
        # Averaged over the cooldown: (6 + 2) / 2 = 4 cores pending, 2 per worker: +2.
        ({}, [cores(6), cores(2)], 1, 3, "pending 4 cores, available 0 cores over 2 min; +2"),
        # Half the exact change, rounded up: +1.
        ({"scale_up_factor": 0.5}, [cores(4)], 1, 2, "+1 workers"),
        # A change under the minimum change is none.
        ({"min_change": 3}, [cores(4)], 1, 1, "; no change"),
        # Never past the maximum.
        ({"max_workers": 2}, [cores(20)], 1, 2, "+1 workers"),
        ({"max_workers": 2}, [cores(20)], 2, 2, "no change (at its maximum, 2)"),
        # 5 idle cores, 2 per worker: 2.5 workers idle, only whole ones leave: -2.
        ({}, [cores(0, 5)], 4, 2, "available 5 cores over 2 min; -2 workers"),
        ({"scale_down_factor": 0.5}, [cores(0, 8)], 5, 3, "-2 workers"),
        ({"scale_down_factor": 0}, [cores(0, 8)], 5, 5, "no change"),
        # Never below the minimum.
        ({"min_workers": 3}, [cores(0, 8)], 4, 3, "-1 workers"),
        # YARN memory shows in GB.
        ({}, [Load(12288, 0, 4096, "MB")], 2, 5, "pending 12.0 GB, available 0 MB over 2 min"),
        ({}, [], 2, 2, "no reading of the product's pending work; no change"),
    ],
)
def test_the_arithmetic_of_a_decision(fields, samples, current, target, words):
    decision = autoscale.decide(policy(**fields), samples, current)
    assert decision.target == target
    assert words in decision.words


def test_the_product_floor_is_never_crossed():
    decision = autoscale.decide(policy(), [cores(0, 10)], 4, least=3)
    assert decision.target == 3 and "-1 workers" in decision.words
    held = autoscale.decide(policy(), [cores(0, 10)], 3, least=3)
    assert held.target == 3 and "no change (at its minimum, 3)" in held.words


@pytest.fixture
def spark(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "spark", size=1, mem=1024)
    Quota.objects.update_or_create(user=alice, defaults={"max_cores": 40, "max_instances": 20})
    return cluster


def answers(fake_nodes, pending: int, free: int = 0, per_worker: int = 1) -> None:
    """What the master's spark-admin load says from now on."""
    found = {"pending_cores": pending, "free_cores": free, "cores_per_worker": per_worker}
    fake_nodes.exec_results["spark-admin"] = (0, json.dumps(found))


def test_fields_are_checked_and_refusals_name_the_field(spark, alice, fake_nodes):
    cases = [
        ({"min_workers": 1}, "max_workers is required", "max_workers"),
        ({"min_workers": 3, "max_workers": 2}, r"min_workers \(3\) is more than", "min_workers"),
        ({"min_workers": 1, "max_workers": 99}, "may number 1 to", "max_workers"),
        ({"min_workers": 1, "max_workers": 3, "cooldown_seconds": 30}, "at least 120 s", None),
        ({"min_workers": 1, "max_workers": 3, "scale_up_factor": 1.5}, "between 0 and 1", None),
        ({"min_workers": 1, "max_workers": 3, "speed": 1}, "unknown field speed", "speed"),
        ({"min_workers": "1", "max_workers": 3}, "min_workers must be a number", None),
    ]
    for given, words, field in cases:
        with pytest.raises(autoscale.PolicyRefused, match=words) as refused:
            autoscale.set_policy(spark.id, given, actor=alice)
        if field:
            assert refused.value.field == field
    assert not ScalingPolicy.objects.exists()
    demo = running(alice, "demo", size=1, mem=64)
    with pytest.raises(autoscale.PolicyRefused, match="reports no pending work"):
        autoscale.set_policy(demo.id, {"min_workers": 1, "max_workers": 2}, actor=alice)


def test_a_pass_reads_then_decides_once_the_cooldown_is_over(spark, alice, fake_nodes):
    start = timezone.now()
    autoscale.set_policy(spark.id, {"min_workers": 1, "max_workers": 3}, actor=alice)
    ScalingPolicy.objects.update(created=start)
    answers(fake_nodes, pending=2)
    assert passes.run_pass(start + timedelta(seconds=60)) == {"read": [spark.id], "resized": []}
    assert LoadSample.objects.filter(cluster=spark).count() == 1
    assert Cluster.objects.get(id=spark.id).state == S.RUNNING  # within the cooldown
    answers(fake_nodes, pending=4)
    report = passes.run_pass(start + timedelta(seconds=121))
    assert report["resized"] == [spark.id]
    cluster = Cluster.objects.get(id=spark.id)
    assert cluster.state == S.RESIZING and cluster.resize_to == 3
    event = cluster.events.get(message__startswith="autoscaling:")
    assert event.message == (
        "autoscaling: pending 3 cores, available 0 cores over 2 min; +2 workers"
    )
    found = ScalingPolicy.objects.get(cluster=spark)
    assert found.decision.endswith("+2 workers") and found.decided_at is not None
    assert not LoadSample.objects.exists()  # the cooldown's readings are spent


def test_a_decision_the_quota_refuses_is_said_and_waits(spark, alice, fake_nodes):
    Quota.objects.filter(user=alice).update(max_instances=2)  # master + 1 worker
    start = timezone.now()
    autoscale.set_policy(spark.id, {"min_workers": 1, "max_workers": 3}, actor=alice)
    ScalingPolicy.objects.update(created=start)
    answers(fake_nodes, pending=2)
    assert passes.run_pass(start + timedelta(seconds=130))["resized"] == []
    event = ClusterEvent.objects.get(cluster=spark, message__startswith="autoscaling:")
    assert event.level == ClusterEvent.Level.WARNING
    assert "+2 workers, not carried out: the quota of user alice is 2 instances" in event.message
    assert "the next cooldown decides again" in event.message
    assert Cluster.objects.get(id=spark.id).state == S.RUNNING


def test_a_hostile_or_failing_reading_is_left_out(spark, alice, fake_nodes):
    start = timezone.now()
    autoscale.set_policy(spark.id, {"min_workers": 1, "max_workers": 3}, actor=alice)
    for said in ('{"pending_cores": "lots", "free_cores": 0, "cores_per_worker": 1}', "nope"):
        fake_nodes.exec_results["spark-admin"] = (0, said)
        assert passes.run_pass(start + timedelta(seconds=5))["read"] == []
    fake_nodes.exec_results["spark-admin"] = (1, '{"error": "load: connection refused"}')
    assert passes.run_pass(start + timedelta(seconds=6))["read"] == []
    # Huge figures are held to their bounds.
    answers(fake_nodes, pending=10**12, per_worker=10**9)
    passes.run_pass(start + timedelta(seconds=7))
    sample = LoadSample.objects.get(cluster=spark)
    assert sample.pending == 100_000 and sample.per_worker == 1_000


def test_a_stopped_cluster_is_not_read_and_remove_keeps_the_size(spark, alice, fake_nodes):
    autoscale.set_policy(spark.id, {"min_workers": 1, "max_workers": 3}, actor=alice)
    Cluster.objects.filter(id=spark.id).update(state=S.STOPPED)
    answers(fake_nodes, pending=4)
    assert passes.run_pass(timezone.now() + timedelta(hours=1)) == {"read": [], "resized": []}
    assert autoscale.remove_policy(spark.id, actor=alice) is True
    assert autoscale.remove_policy(spark.id, actor=alice) is False


def test_staff_give_a_group_a_default_policy_and_a_limit(fake_nodes, pool, alice, catalog):
    from django.contrib.auth.models import Group

    from apps.clusters.models import GroupScaling

    team = Group.objects.create(name="team")
    alice.groups.add(team)
    GroupScaling.objects.create(
        group=team, max_workers=4, default_min_workers=1, default_max_workers=2
    )
    spark = running(alice, "spark", size=1, mem=1024)
    made = ScalingPolicy.objects.get(cluster=spark)
    assert (made.min_workers, made.max_workers, made.cooldown_seconds) == (1, 2, 120)
    demo = running(alice, "demo", size=1, mem=64)  # reports no pending work: no default
    assert not ScalingPolicy.objects.filter(cluster=demo).exists()
    with pytest.raises(autoscale.PolicyRefused, match="group team lets its members' policies"):
        autoscale.set_policy(spark.id, {"min_workers": 1, "max_workers": 5}, actor=alice)
    autoscale.set_policy(spark.id, {"min_workers": 1, "max_workers": 4}, actor=alice)
