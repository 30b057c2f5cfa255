"""Tokens issued and revoked (API, admin, command line), node state changes (API, admin
actions, the node form) and disk marks (admin actions): one row each, never the token's
secret."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from apps.audit.models import AuditEvent
from apps.clusters.models import DiskAllocation
from apps.clusters.tests.factories import make_cluster, make_node, wants
from apps.inventory.models import Node
from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token

from .conftest import ADMIN_ADDRESS, USER_ADDRESS, bearer, only_event

pytestmark = pytest.mark.django_db
A = AuditEvent.Action


def test_the_token_api_records_creating_and_revoking_without_the_secret(alice):
    api = bearer(alice)
    asked = {"name": "ci", "read_only": True, "expires_in_days": 7}
    response = api.post("/api/v1/tokens", asked, format="json")
    assert response.status_code == 201
    body = response.json()
    assert api.delete(f"/api/v1/tokens/{body['id']}").status_code == 204
    assert api.delete(f"/api/v1/tokens/{body['id']}").status_code == 204  # already revoked

    created = only_event(A.TOKEN_CREATE, object_id=body["id"])
    assert (created.actor, created.client_address) == (alice, USER_ADDRESS)
    assert created.detail["name"] == "ci" and created.detail["read_only"] is True
    assert created.detail["owner"] == "alice" and created.detail["expires_at"]
    stored = json.dumps(created.detail) + created.object_repr
    token = ApiToken.objects.get(id=body["id"])
    assert body["token"] not in stored and token.digest not in stored
    assert body["token"].split("_", 2)[2] not in stored  # the secret part (may hold "_")
    revoked = only_event(A.TOKEN_REVOKE, object_id=body["id"])
    assert (revoked.actor, revoked.object_repr) == (alice, f"ci ({token.prefix}…) of alice")


def test_the_command_line_issues_as_the_system(alice):
    call_command("issue_token", "alice", "--name", "cron", stdout=StringIO(), stderr=StringIO())
    event = only_event(A.TOKEN_CREATE, detail__name="cron")
    assert event.actor is None and event.actor_name == ""
    assert event.client_address is None and event.request_id == ""


def test_an_admin_issuing_and_revoking_for_a_user_is_the_actor(as_admin, admin_user, alice):
    response = as_admin.post("/admin/tokens/apitoken/add/", {"user": alice.id, "name": "given"})
    assert response.status_code == 302
    given = ApiToken.objects.get(name="given")
    assert only_event(A.TOKEN_CREATE, object_id=given.id).actor == admin_user
    other = issue_token(alice, "other").token
    bulk = {"action": "revoke_tokens", "_selected_action": [given.id, other.id]}
    response = as_admin.post("/admin/tokens/apitoken/", bulk)
    assert response.status_code == 302
    for token in (given, other):
        event = only_event(A.TOKEN_REVOKE, object_id=token.id)
        assert (event.actor, event.client_address) == (admin_user, ADMIN_ADDRESS)


def test_the_nodes_api_records_drain_and_undrain_once_each(admin_user):
    node = make_node()
    api = bearer(admin_user, ADMIN_ADDRESS)
    assert api.post(f"/api/v1/nodes/{node.id}/drain").status_code == 200
    assert api.post(f"/api/v1/nodes/{node.id}/drain").status_code == 200  # already draining
    assert api.post(f"/api/v1/nodes/{node.id}/undrain").status_code == 200

    drained = only_event(A.NODE_DRAIN, object_id=node.id)
    assert (drained.actor, drained.client_address) == (admin_user, ADMIN_ADDRESS)
    assert (drained.object_type, drained.object_repr) == ("inventory.node", node.name)
    assert drained.detail == {"previous": "active"}
    assert only_event(A.NODE_ACTIVATE, object_id=node.id).detail == {"previous": "draining"}


def test_a_user_cannot_drain_and_leaves_no_row(alice):
    node = make_node()
    assert bearer(alice).post(f"/api/v1/nodes/{node.id}/drain").status_code == 403
    assert not AuditEvent.objects.filter(object_type="inventory.node").exists()


def test_the_node_admin_actions_and_form_record_state_changes(as_admin, admin_user):
    node = make_node()
    url = "/admin/inventory/node/"
    as_admin.post(url, {"action": "drain", "_selected_action": [node.id]})
    as_admin.post(url, {"action": "activate", "_selected_action": [node.id]})
    form = {
        "name": node.name,
        "endpoint": node.endpoint,
        "tls_dir": "",
        "cores": node.cores,
        "memory_mb": node.memory_mb,
        "state": "maintenance",
        "labels": "{}",
        "disk_root": "",
        "network_parent": "",
        "failed_checks": 0,
    }
    response = as_admin.post(f"{url}{node.id}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Node.objects.get(id=node.id).state == Node.State.MAINTENANCE

    rows = AuditEvent.objects.filter(object_id=node.id, object_type="inventory.node")
    assert list(rows.order_by("id").values_list("action", "detail")) == [
        (A.NODE_DRAIN, {"previous": "active"}),
        (A.NODE_ACTIVATE, {"previous": "draining"}),
        (A.NODE_MAINTENANCE, {"previous": "active"}),
    ]
    assert {(r.actor_id, r.client_address) for r in rows} == {(admin_user.id, ADMIN_ADDRESS)}


def test_the_disk_admin_actions_record_each_change_and_name_a_refusal(as_admin, admin_user):
    node = make_node(disks={"hdd": 2})
    first, second = node.disks.order_by("id")
    url = "/admin/inventory/disk/"
    as_admin.post(url, {"action": "mark_failed", "_selected_action": [first.id, second.id]})
    as_admin.post(url, {"action": "mark_retired", "_selected_action": [second.id]})
    holder = make_cluster(admin_user, wants(1)).instances.get()  # failed while in use
    DiskAllocation.objects.create(disk=first, instance=holder, active=True)
    page = as_admin.post(
        url, {"action": "mark_available", "_selected_action": [first.id, second.id]}, follow=True
    ).content.decode()
    assert "1 disk(s) marked available" in page
    assert f"Left as it was: {first} is held by" in page

    rows = AuditEvent.objects.filter(object_type="inventory.disk").order_by("id")
    assert list(rows.values_list("action", "object_id", "detail")) == [
        (A.DISK_FAIL, first.id, {"previous": "available"}),
        (A.DISK_FAIL, second.id, {"previous": "available"}),
        (A.DISK_RETIRE, second.id, {"previous": "failed"}),
        (A.DISK_AVAILABLE, second.id, {"previous": "retired"}),
    ]
    assert {(r.actor_id, r.client_address) for r in rows} == {(admin_user.id, ADMIN_ADDRESS)}
    # The change form shows the state but does not take it: only the actions change it.
    form = as_admin.get(f"{url}{first.id}/change/").content.decode()
    assert 'name="state"' not in form
