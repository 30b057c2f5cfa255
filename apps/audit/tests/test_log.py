"""The log itself: read-only in the admin, kept when what it talks about is deleted,
append-only in the database, written with the action's transaction, and the system's own
actions (lease expiry) have no actor."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import DatabaseError, transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.audit.services import record
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_node
from apps.inventory.models import Node
from apps.inventory.services import set_node_state
from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token, revoke

from .conftest import make_cluster, only_event

pytestmark = pytest.mark.django_db
A = AuditEvent.Action
URL = "/admin/audit/auditevent/"


@pytest.fixture
def auditor(client):
    """Staff with nothing but the view permission on the log."""
    user = get_user_model().objects.create_user(
        "auditor", password="auditor-pass-123", is_staff=True
    )
    user.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    client.force_login(user)
    return client


@pytest.fixture
def some_events(alice, bob, demo):
    make_cluster(alice, demo, name="alices")
    make_cluster(bob, demo, name="bobs")
    return AuditEvent.objects.filter(action=A.CLUSTER_LAUNCH)


def test_staff_see_the_log_with_filters_search_and_dates(auditor, some_events):
    page = auditor.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert "alices of alice" in html and "bobs of bob" in html
    assert "By action" in html and "By actor" in html  # list filters
    assert '<nav class="toplinks">' in html  # the date hierarchy
    found = auditor.get(URL, {"q": "bobs"}).content.decode()
    assert "bobs of bob" in found and "alices of alice" not in found
    filtered = auditor.get(URL, {"action__exact": A.CLUSTER_LAUNCH}).content.decode()
    assert "alices of alice" in filtered


@pytest.mark.parametrize("persona", ["auditor", "superuser"])
def test_nobody_adds_changes_or_deletes_events(client, auditor, admin_user, some_events, persona):
    if persona == "superuser":
        client.force_login(admin_user)
    event = some_events.first()
    html = client.get(URL).content.decode()
    assert f"{URL}add/" not in html
    assert "delete_selected" not in html  # no bulk delete action
    assert client.get(f"{URL}add/").status_code == 403
    assert client.get(f"{URL}{event.id}/delete/").status_code == 403
    detail = client.get(f"{URL}{event.id}/change/")
    assert detail.status_code == 200 and 'name="_save"' not in detail.content.decode()
    client.post(f"{URL}{event.id}/change/", {"action": "cluster.stop", "actor_name": "x"})
    event.refresh_from_db()
    assert (event.action, event.actor_name) != ("cluster.stop", "x")


def test_events_outlive_the_user_cluster_token_and_node(alice, demo):
    cluster = make_cluster(alice, demo, "running", name="doomed")
    services.request_destroy(cluster.id, actor=alice)
    token = issue_token(alice, "short-lived", actor=alice).token
    revoke(token.id, actor=alice)
    node = make_node(disks={})
    node_id = node.id
    set_node_state(node_id, Node.State.DRAINING, actor=alice)

    Cluster.objects.filter(id=cluster.id).delete()
    node.delete()
    alice.delete()  # takes her tokens with her
    assert not ApiToken.objects.filter(id=token.id).exists()

    rows = AuditEvent.objects.filter(actor_name="alice")
    assert set(rows.values_list("action", flat=True)) == {
        A.CLUSTER_LAUNCH,
        A.CLUSTER_DESTROY,
        A.TOKEN_CREATE,
        A.TOKEN_REVOKE,
        A.NODE_DRAIN,
    }
    assert all(row.actor_id is None for row in rows)  # the link goes, the name stays
    assert only_event(A.CLUSTER_DESTROY, object_id=cluster.id).object_repr == "doomed of alice"
    assert only_event(A.NODE_DRAIN, object_id=node_id).object_repr == node.name


def test_the_database_refuses_to_change_or_delete_an_event(alice):
    event = record(A.NODE_DRAIN, alice, object_type="inventory.node", object_repr="n1")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(id=event.id).update(actor_name="mallory")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(id=event.id).delete()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(id=event.id).update(actor=None, action=A.NODE_ACTIVATE)
    event.refresh_from_db()
    assert (event.actor_name, event.action) == ("alice", A.NODE_DRAIN)


def test_an_action_rolled_back_leaves_no_event(alice, demo):
    cluster = make_cluster(alice, demo, "running")
    with pytest.raises(RuntimeError), transaction.atomic():
        services.request_stop(cluster.id, actor=alice)
        assert AuditEvent.objects.filter(action=A.CLUSTER_STOP).exists()  # seen inside...
        raise RuntimeError("the caller's transaction fails after the stop")
    assert Cluster.objects.get(id=cluster.id).state == "running"
    assert not AuditEvent.objects.filter(action=A.CLUSTER_STOP).exists()  # ...gone with it


def test_lease_expiry_destroys_as_the_system(alice, demo):
    cluster = make_cluster(alice, demo, "running", lease_hours=1)
    assert services.expire_leases(timezone.now() + timedelta(hours=2)) == [cluster.id]
    assert services.expire_leases(timezone.now() + timedelta(hours=3)) == []

    event = only_event(A.CLUSTER_DESTROY, object_id=cluster.id)
    assert (event.actor, event.actor_name) == (None, "")
    assert event.detail == {"keep_data": True, "reason": "lease expired"}
    assert event.client_address is None and event.request_id == ""
    assert str(event).endswith(f"system cluster.destroy {cluster.name} of alice")
