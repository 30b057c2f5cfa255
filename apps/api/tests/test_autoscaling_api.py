"""/api/v1/clusters/<id>/autoscaling: a policy set, read and taken away, and refusals naming
the field; the cluster's detail shows it."""

import pytest

from apps.audit.models import AuditEvent
from apps.clusters.models import ScalingPolicy
from apps.nodes.fake import FakeNodes
from workers.tests.fake_launch import running

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spark_cluster(alice, catalog):
    from apps.clusters.tests.factories import make_network, make_node

    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 4, "ssd": 4})
    with FakeNodes():
        yield running(alice, "spark", size=1, mem=1024)


def test_a_policy_is_set_read_and_removed(api, spark_cluster):
    path = f"/api/v1/clusters/{spark_cluster.id}/autoscaling"
    assert api("owner").get(path).status_code == 404
    asked = {"min_workers": 1, "max_workers": 3, "scale_down_factor": 0.5}
    made = api("owner").put(path, asked, format="json")
    assert made.status_code == 200, made.json()
    assert made.json() | {"decided_at": None} == {
        "min_workers": 1,
        "max_workers": 3,
        "cooldown_seconds": 120,
        "scale_up_factor": 1.0,
        "scale_down_factor": 0.5,
        "min_change": 1,
        "decommission_timeout_seconds": 600,
        "decided_at": None,
        "decision": "",
    }
    detail = api("owner").get(f"/api/v1/clusters/{spark_cluster.id}").json()
    assert detail["autoscaling"]["max_workers"] == 3
    assert api("other").put(path, asked, format="json").status_code == 404
    assert api("owner").delete(path).status_code == 204
    assert not ScalingPolicy.objects.exists()
    assert api("owner").get(f"/api/v1/clusters/{spark_cluster.id}").json()["autoscaling"] is None
    actions = AuditEvent.objects.filter(action="cluster.autoscaling")
    assert [a.detail.get("off", False) for a in actions.order_by("id")] == [False, True]


def test_refusals_name_the_field(api, spark_cluster):
    path = f"/api/v1/clusters/{spark_cluster.id}/autoscaling"
    short = api("owner").put(
        path, {"min_workers": 1, "max_workers": 3, "cooldown_seconds": 10}, format="json"
    )
    assert short.status_code == 400
    assert short.json()["fields"] == {
        "cooldown_seconds": "the cooldown must be at least 120 s; asked 10"
    }
    missing = api("owner").put(path, {"min_workers": 1}, format="json")
    assert missing.status_code == 400 and "max_workers" in missing.json()["fields"]
    factor = api("owner").put(
        path, {"min_workers": 1, "max_workers": 2, "scale_up_factor": 2}, format="json"
    )
    assert factor.status_code == 400 and "scale_up_factor" in factor.json()["fields"]
