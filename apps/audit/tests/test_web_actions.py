"""The browser's way in: the launch form, the htmx-posted cluster actions, the token page
and the cluster admin's force-destroy write the same audit rows as the API, with the
session's user and address."""

import pytest
from django.urls import reverse

from apps.accounts.models import Quota
from apps.audit.models import AuditEvent
from apps.clusters.models import Cluster
from apps.tokens.models import ApiToken

from .conftest import ADMIN_ADDRESS, USER_ADDRESS, events_of, make_cluster, only_event

pytestmark = pytest.mark.django_db
A = AuditEvent.Action
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_launch_form_records_the_launch(as_alice, alice, demo):
    url = reverse("web:launch", args=["demo", "1.0"])
    form = {
        "name": "from-web",
        "size": 1,
        "disks": 1,
        "cpu": 1,
        "mem": 64,
        "disk_kind": "hdd",
        "message": "hi",
    }
    response = as_alice.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    cluster = Cluster.objects.get(owner=alice, name="from-web")
    event = only_event(A.CLUSTER_LAUNCH, object_id=cluster.id)
    assert (event.actor, event.client_address) == (alice, USER_ADDRESS)
    assert event.request_id  # the middleware's id for this request


def test_an_over_quota_launch_form_records_nothing(as_alice, alice, demo):
    Quota.objects.create(user=alice, max_clusters=0)
    url = reverse("web:launch", args=["demo", "1.0"])
    response = as_alice.post(
        url, {"name": "too-many", "size": 1, "disks": 1, "cpu": 1, "mem": 64, "disk_kind": "hdd"}
    )
    assert response.status_code == 400
    assert not AuditEvent.objects.filter(action=A.CLUSTER_LAUNCH).exists()


def test_htmx_cluster_actions_record_each_action_once(as_alice, alice, demo):
    cluster = make_cluster(alice, demo, "running", name="clicky", lease_hours=1)
    act = lambda verb, **data: as_alice.post(  # noqa: E731
        reverse(f"web:{verb}", args=[cluster.id]), data, **HTMX
    )
    assert act("stop").status_code == 302
    Cluster.objects.filter(id=cluster.id).update(state="stopped")
    assert act("start").status_code == 302
    Cluster.objects.filter(id=cluster.id).update(state="running")
    assert act("extend", hours="2").status_code == 302
    assert act("destroy", keep_data="no").status_code == 302
    assert act("destroy", keep_data="no").status_code == 302  # a second click changes nothing

    assert events_of(cluster) == [
        A.CLUSTER_LAUNCH,
        A.CLUSTER_STOP,
        A.CLUSTER_START,
        A.CLUSTER_EXTEND,
        A.CLUSTER_DESTROY,
    ]
    rows = AuditEvent.objects.filter(object_id=cluster.id).exclude(action=A.CLUSTER_LAUNCH)
    assert {(e.actor_id, e.client_address) for e in rows} == {(alice.id, USER_ADDRESS)}
    assert only_event(A.CLUSTER_DESTROY).detail == {"keep_data": False}
    assert only_event(A.CLUSTER_EXTEND).detail["hours"] == 2


def test_a_refused_web_action_records_nothing(as_alice, alice, demo):
    cluster = make_cluster(alice, demo, "queued")
    response = as_alice.post(reverse("web:stop", args=[cluster.id]), **HTMX)
    assert response.status_code == 302  # back to the page, with the refusal as a message
    assert events_of(cluster) == [A.CLUSTER_LAUNCH]


def test_the_token_page_records_creating_and_revoking(as_alice, alice):
    response = as_alice.post(
        reverse("tokens:list"), {"name": "laptop", "expires_in_days": 30, "read_only": "on"}
    )
    assert response.status_code == 200
    token = ApiToken.objects.get(user=alice, name="laptop")
    secret = response.context["issued"].secret
    assert as_alice.post(reverse("tokens:revoke", args=[token.id])).status_code == 302
    assert as_alice.post(reverse("tokens:revoke", args=[token.id])).status_code == 302

    created = only_event(A.TOKEN_CREATE, object_id=token.id)
    assert (created.actor, created.client_address) == (alice, USER_ADDRESS)
    assert created.detail["name"] == "laptop" and created.detail["read_only"] is True
    assert created.detail["expires_at"] and created.detail["prefix"] == token.prefix
    assert secret not in str(created.detail) and token.digest not in str(created.detail)
    revoked = only_event(A.TOKEN_REVOKE, object_id=token.id)
    assert (revoked.actor, revoked.client_address) == (alice, USER_ADDRESS)


def test_the_admins_force_destroy_records_each_cluster(as_admin, admin_user, alice, bob, demo):
    running = make_cluster(alice, demo, "running", name="busy")
    queued = make_cluster(bob, demo, "queued", name="waiting")
    done = make_cluster(bob, demo, "destroyed", name="gone")
    bulk = {"action": "force_destroy", "_selected_action": [running.id, queued.id, done.id]}
    assert as_admin.post("/admin/clusters/cluster/", bulk).status_code == 302

    assert only_event(A.CLUSTER_DESTROY, object_id=running.id).detail == {"keep_data": False}
    assert only_event(A.CLUSTER_DESTROY, object_id=queued.id).detail == {
        "keep_data": False,
        "cancelled": True,
    }
    assert events_of(done) == [A.CLUSTER_LAUNCH]  # already destroyed: nothing happened
    rows = AuditEvent.objects.filter(action=A.CLUSTER_DESTROY)
    assert {(r.actor_id, r.client_address) for r in rows} == {(admin_user.id, ADMIN_ADDRESS)}
