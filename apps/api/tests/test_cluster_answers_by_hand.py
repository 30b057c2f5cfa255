"""The cluster list and detail are written by hand (issue 34: serializers.list_rows and
detail_dict); DRF's ClusterSerializer and ClusterDetailSerializer, which the schema describes
and the launches and actions still answer with, must render to the same bytes for every shape a
cluster takes and every caller (owner, staff, a read-only token)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from apps.api.serializers.clusters import ClusterDetailSerializer, ClusterSerializer
from apps.api.views.clusters import detail_queryset
from apps.clusters import notebook
from apps.clusters.models import Cluster, ClusterEvent, Instance, ScalingPolicy
from apps.clusters.reservation import Reservation, reserve
from apps.clusters.tests.factories import make_network, make_node

from .conftest import make_cluster, token_for


@pytest.fixture
def pool(db):
    make_network()
    for _ in range(3):
        make_node(cores=16, memory_mb=65536, disks={"hdd": 6, "ssd": 2})


def placed(owner, demo, size: int = 2, **changes) -> Cluster:
    cluster = make_cluster(owner, demo, size=size, disks=2)
    assert isinstance(reserve(cluster.id), Reservation)
    Cluster.objects.filter(id=cluster.id).update(state="running", **changes)
    return Cluster.objects.get(id=cluster.id)


@pytest.fixture
def shapes(alice, demo, pool) -> list[Cluster]:
    """Running with disks, a lease and an idle limit; queued behind another; failed with a
    reason and error events; one with a notebook being added."""
    now = timezone.now()
    running = placed(
        alice,
        demo,
        expires_at=now + timedelta(hours=8),
        running_at=now - timedelta(minutes=5),
        idle_limit_minutes=30,
        active_signal="ssh",
        active_at=now - timedelta(minutes=2),
    )
    ClusterEvent.objects.create(cluster=running, message="configuring")
    ClusterEvent.objects.create(cluster=running, message="running")
    ScalingPolicy.objects.create(
        cluster=running,
        min_workers=1,
        max_workers=4,
        scale_down_factor=0.5,
        decided_at=now,
        decision="pending 2 cores, available 0 cores over 2 min; +2 workers",
    )
    queued = [make_cluster(alice, demo, size=1) for _ in range(2)]
    Cluster.objects.filter(id=queued[1].id).update(reason="no room: 2 cores short")
    failed = placed(alice, demo, size=1, failed_at=now)
    Cluster.objects.filter(id=failed.id).update(state="failed", reason="node-1 did not answer")
    ClusterEvent.objects.create(cluster=failed, level="error", message="node-1 did not answer")
    with_notebook = placed(alice, demo, size=1, running_at=now)
    Instance.objects.create(
        cluster=with_notebook,
        role=notebook.ROLE,
        index=0,
        hostname="notebook-0",
        cores=1,
        memory_mb=2048,
        disks=1,
        state=Instance.State.PENDING,
    )
    return [running, *queued, failed, with_notebook]


def client_of(user, **token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(user, **token)}")
    return client


CALLERS = ["owner", "read_only", "admin"]


@pytest.fixture
def caller(request, alice, admin_user) -> APIClient:
    return {
        "owner": lambda: client_of(alice),
        "read_only": lambda: client_of(alice, read_only=True),
        "admin": lambda: client_of(admin_user),
    }[request.param]()


@pytest.fixture
def frozen(monkeypatch, shapes):
    """One clock for both answers: a queued cluster's provisioning counts its seconds so far."""
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)


@pytest.mark.parametrize("caller", CALLERS, indirect=True)
def test_the_detail_is_the_serializers_to_the_byte(caller, shapes, frozen):
    for cluster in shapes:
        response = caller.get(f"/api/v1/clusters/{cluster.id}")
        assert response.status_code == 200
        request = response.renderer_context["request"]
        fresh = detail_queryset().get(id=cluster.id)
        expected = ClusterDetailSerializer(fresh, context={"request": request}).data
        assert response.content == JSONRenderer().render(expected), cluster
    # Each shape showed what makes it one.
    bodies = [caller.get(f"/api/v1/clusters/{c.id}").json() for c in shapes]
    assert bodies[0]["instances"][0]["disks"] and bodies[0]["expires_at"]
    assert bodies[0]["idle"]["effective_limit_minutes"] == 30
    assert bodies[0]["autoscaling"]["scale_down_factor"] == 0.5
    assert bodies[1]["autoscaling"] is None
    assert bodies[2]["queue"]["position"] == 2
    assert bodies[3]["events"][-1]["level"] == "error"
    assert bodies[4]["notebook"]["state"] == "adding"


@pytest.mark.parametrize("caller", CALLERS, indirect=True)
def test_the_list_is_the_serializers_to_the_byte(caller, shapes, frozen):
    for path in ("/api/v1/clusters", "/api/v1/clusters?ordering=name&page_size=2&page=2"):
        response = caller.get(path)
        assert response.status_code == 200
        request = response.renderer_context["request"]
        body = response.json()
        ids = [row["id"] for row in body["results"]]
        assert ids
        by_id = {c.id: c for c in Cluster.objects.filter(id__in=ids)}
        rows = ClusterSerializer(
            [by_id[i] for i in ids], many=True, context={"request": request}
        ).data
        expected = {**body, "results": rows}
        assert response.content == JSONRenderer().render(expected)
