"""Quota changes from the admin (form, bulk action, delete) and the API: one row per quota
changed, with the old and new limits, the admin as actor and the admin's address."""

from io import StringIO

import pytest
from django.core.management import call_command

from apps.accounts.models import LIMIT_FIELDS, Quota
from apps.audit.models import AuditEvent

from .conftest import ADMIN_ADDRESS, bearer, only_event

pytestmark = pytest.mark.django_db
A = AuditEvent.Action
URL = "/admin/accounts/quota/"


def form(quota_user, **limits) -> dict:
    """The quota admin form's fields, with `limits` set and every other limit empty."""
    return {
        "user": quota_user.id if quota_user else "",
        "group": "",
        **{name: limits.get(name, "") for name in LIMIT_FIELDS},
    }


def test_the_admin_form_records_a_new_quota_with_its_limits(as_admin, admin_user, alice):
    response = as_admin.post(f"{URL}add/", form(alice, max_cores=8, max_disks=4))
    assert response.status_code == 302, response.content.decode()[:3000]
    quota = Quota.objects.get(user=alice)

    event = only_event(A.QUOTA_CHANGE, object_id=quota.id)
    assert (event.actor, event.client_address) == (admin_user, ADMIN_ADDRESS)
    assert (event.object_type, event.object_repr) == ("accounts.quota", "quota of alice")
    assert event.detail["old"] is None
    assert event.detail["new"]["max_cores"] == 8 and event.detail["new"]["max_disks"] == 4
    assert event.detail["new"]["holder"] == "alice"


def test_the_admin_form_records_only_the_limits_that_changed(as_admin, admin_user, alice):
    quota = Quota.objects.create(user=alice, max_cores=8, max_disks=4)
    response = as_admin.post(f"{URL}{quota.id}/change/", form(alice, max_cores=16, max_disks=4))
    assert response.status_code == 302
    event = only_event(A.QUOTA_CHANGE, object_id=quota.id)
    assert event.actor == admin_user
    assert event.detail == {"old": {"max_cores": 8}, "new": {"max_cores": 16}}

    # Saving the form again without a change is not a change.
    as_admin.post(f"{URL}{quota.id}/change/", form(alice, max_cores=16, max_disks=4))
    assert AuditEvent.objects.filter(action=A.QUOTA_CHANGE).count() == 1


def test_the_bulk_set_limits_action_records_each_quota(as_admin, admin_user, alice, bob):
    mine = Quota.objects.create(user=alice, max_cores=4)
    theirs = Quota.objects.create(user=bob, max_cores=100, max_disks=7)
    bulk = {
        "action": "set_limits",
        "_selected_action": [mine.id, theirs.id],
        "apply": "1",
        "max_disks": "7",
        "clear": ["max_cores"],
    }
    response = as_admin.post(URL, bulk)
    assert response.status_code == 302
    assert only_event(A.QUOTA_CHANGE, object_id=mine.id).detail == {
        "old": {"max_cores": 4, "max_disks": None},
        "new": {"max_cores": None, "max_disks": 7},
    }
    bobs = only_event(A.QUOTA_CHANGE, object_id=theirs.id)
    assert bobs.detail == {"old": {"max_cores": 100}, "new": {"max_cores": None}}
    assert (bobs.actor, bobs.client_address) == (admin_user, ADMIN_ADDRESS)


def test_deleting_a_quota_in_the_admin_records_its_last_limits(as_admin, alice):
    quota = Quota.objects.create(user=alice, max_cores=4)
    response = as_admin.post(f"{URL}{quota.id}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Quota.objects.exists()
    event = only_event(A.QUOTA_CHANGE, object_id=quota.id)
    assert event.detail["new"] is None and event.detail["old"]["max_cores"] == 4


def test_the_quota_api_records_create_update_and_delete(admin_user, bob):
    api = bearer(admin_user, ADMIN_ADDRESS)
    created = api.post("/api/v1/quotas", {"user": "bob", "max_cores": 4}, format="json")
    assert created.status_code == 201
    quota_id = created.json()["id"]
    changed = api.patch(f"/api/v1/quotas/{quota_id}", {"max_cores": 6}, format="json")
    assert changed.status_code == 200
    assert api.delete(f"/api/v1/quotas/{quota_id}").status_code == 204

    rows = AuditEvent.objects.filter(action=A.QUOTA_CHANGE, object_id=quota_id).order_by("id")
    assert [(r.detail["old"] or {}).get("max_cores") for r in rows] == [None, 4, 6]
    assert [(r.detail["new"] or {}).get("max_cores") for r in rows] == [4, 6, None]
    assert {(r.actor_id, r.client_address, r.object_repr) for r in rows} == {
        (admin_user.id, ADMIN_ADDRESS, "quota of bob")
    }


def test_a_refused_quota_change_records_nothing(admin_user, alice, bob):
    both = bearer(admin_user).post("/api/v1/quotas", {"max_cores": 1}, format="json")
    assert both.status_code == 400  # names neither a user nor a group
    assert (
        bearer(bob)
        .post("/api/v1/quotas", {"user": "bob", "max_cores": 99}, format="json")
        .status_code
        == 403
    )
    assert not AuditEvent.objects.filter(action=A.QUOTA_CHANGE).exists()


def test_seeding_the_demo_quota_is_the_system_and_only_when_it_changes(db):
    for _ in range(2):
        call_command("seed_demo", stdout=StringIO())
    event = only_event(A.QUOTA_CHANGE, object_repr="quota of demo")
    assert event.actor is None and event.detail["old"] is None
    assert event.detail["new"]["max_clusters"] == 4
