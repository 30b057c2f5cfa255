"""Cluster actions through the REST API and the CESGA surface: one audit row each, naming the
token's user, the cluster, what was asked and the client's address; refusals write none."""

from datetime import datetime, timedelta

import pytest

from apps.accounts.models import Quota
from apps.audit.models import AuditEvent
from apps.clusters.models import Cluster

from .conftest import USER_ADDRESS, bearer, cesga_client, events_of, make_cluster, only_event

pytestmark = pytest.mark.django_db
A = AuditEvent.Action


def test_a_launch_records_who_what_and_from_where(alice, demo):
    response = bearer(alice).post(
        "/api/v1/products/demo/1.0",
        {"size": 2, "disks": 1, "name": "audited", "lease": 5},
        format="json",
        HTTP_X_REQUEST_ID="launch-req-0001",
    )
    assert response.status_code == 202, response.content
    cluster = Cluster.objects.get(id=response.json()["id"])

    event = only_event(A.CLUSTER_LAUNCH)
    assert (event.actor, event.actor_name) == (alice, "alice")
    assert (event.object_type, event.object_id) == ("clusters.cluster", cluster.id)
    assert event.object_repr == "audited of alice"
    assert event.detail["options"] == {"size": 2, "disks": 1}
    assert event.detail["instances"] == 3  # a master and two workers
    assert event.detail["lease_hours"] == 5
    assert event.client_address == USER_ADDRESS
    assert event.request_id == "launch-req-0001" == response["X-Request-ID"]


def test_a_launch_over_the_quota_records_nothing(alice, demo):
    Quota.objects.create(user=alice, max_clusters=0)
    response = bearer(alice).post("/api/v1/products/demo/1.0", {"size": 1}, format="json")
    assert response.status_code == 403
    assert not Cluster.objects.exists()
    assert not AuditEvent.objects.filter(action=A.CLUSTER_LAUNCH).exists()


def test_stop_and_start_are_recorded_once_each(alice, demo):
    cluster = make_cluster(alice, demo, "running", name="pausing")
    api = bearer(alice)
    assert api.post(f"/api/v1/clusters/{cluster.id}/stop").status_code == 202
    assert api.post(f"/api/v1/clusters/{cluster.id}/stop").status_code == 202  # already stopping
    Cluster.objects.filter(id=cluster.id).update(state="stopped")  # as the worker would
    assert api.post(f"/api/v1/clusters/{cluster.id}/start").status_code == 202

    stop = only_event(A.CLUSTER_STOP, object_id=cluster.id)
    start = only_event(A.CLUSTER_START, object_id=cluster.id)
    for event in (stop, start):
        assert event.actor == alice and event.client_address == USER_ADDRESS
        assert event.object_repr == "pausing of alice"
    assert events_of(cluster) == [A.CLUSTER_LAUNCH, A.CLUSTER_STOP, A.CLUSTER_START]


def test_an_action_the_state_refuses_answers_409_and_records_nothing(alice, demo):
    cluster = make_cluster(alice, demo, "queued")
    api = bearer(alice)
    assert api.post(f"/api/v1/clusters/{cluster.id}/stop").status_code == 409
    assert api.post(f"/api/v1/clusters/{cluster.id}/start").status_code == 409
    Cluster.objects.filter(id=cluster.id).update(state="destroyed")
    assert api.post(f"/api/v1/clusters/{cluster.id}/extend", {"hours": 1}).status_code == 409
    assert events_of(cluster) == [A.CLUSTER_LAUNCH]


def test_an_extension_records_the_hours_and_the_new_lease_end(alice, demo):
    cluster = make_cluster(alice, demo, "running", lease_hours=1)
    response = bearer(alice).post(
        f"/api/v1/clusters/{cluster.id}/extend", {"hours": 3}, format="json"
    )
    assert response.status_code == 200, response.content
    cluster.refresh_from_db()

    event = only_event(A.CLUSTER_EXTEND, object_id=cluster.id)
    assert event.actor == alice and event.client_address == USER_ADDRESS
    assert event.detail["hours"] == 3
    # JSON keeps times to the millisecond.
    new_end = datetime.fromisoformat(event.detail["expires_at"])
    assert abs(new_end - cluster.expires_at) < timedelta(milliseconds=1)
    previous = datetime.fromisoformat(event.detail["previous_end"])
    assert abs(new_end - previous - timedelta(hours=3)) < timedelta(milliseconds=1)


def test_a_destroy_records_whether_data_is_kept_and_only_once(alice, demo):
    cluster = make_cluster(alice, demo, "running")
    api = bearer(alice)
    assert api.delete(f"/api/v1/clusters/{cluster.id}?keep_data=false").status_code == 202
    assert api.delete(f"/api/v1/clusters/{cluster.id}").status_code == 202  # already destroying

    event = only_event(A.CLUSTER_DESTROY, object_id=cluster.id)
    assert event.actor == alice and event.client_address == USER_ADDRESS
    assert event.detail == {"keep_data": False}


def test_cancelling_a_queued_cluster_is_a_destroy_too(alice, demo):
    cluster = make_cluster(alice, demo, "queued")
    assert bearer(alice).delete(f"/api/v1/clusters/{cluster.id}").status_code == 202
    event = only_event(A.CLUSTER_DESTROY, object_id=cluster.id)
    assert event.detail == {"keep_data": True, "cancelled": True}


def test_an_admin_destroying_someone_elses_cluster_is_the_actor(alice, admin_user, demo):
    cluster = make_cluster(alice, demo, "running")
    response = bearer(admin_user, "198.51.100.9").delete(f"/api/v1/clusters/{cluster.id}")
    assert response.status_code == 202
    event = only_event(A.CLUSTER_DESTROY, object_id=cluster.id)
    assert (event.actor, event.client_address) == (admin_user, "198.51.100.9")
    assert event.object_repr.endswith("of alice")


def test_the_cesga_surface_records_launch_and_destroy(alice, demo):
    cesga = cesga_client(alice)
    launched = cesga.post("/bigdata/api/v1/products/demo/1.0", {"size": 1}, format="json")
    assert launched.status_code == 202, launched.content
    cluster = Cluster.objects.get(owner=alice)
    Cluster.objects.filter(id=cluster.id).update(state="running")
    path = f"/bigdata/api/v1/clusters/alice/demo/1.0/{cluster.id}"
    assert cesga.delete(path).status_code == 200

    assert events_of(cluster) == [A.CLUSTER_LAUNCH, A.CLUSTER_DESTROY]
    for action in (A.CLUSTER_LAUNCH, A.CLUSTER_DESTROY):
        event = only_event(action, object_id=cluster.id)
        assert event.actor == alice and event.client_address == USER_ADDRESS
