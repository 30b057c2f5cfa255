"""/quota and /tokens: the caller's own limits and personal tokens."""

import pytest
from django.contrib.auth.models import Group

from apps.accounts.models import Quota
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node
from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token

from .conftest import OWN_READ, OWN_WRITE, PERSONAS, make_cluster


@pytest.mark.parametrize("persona", PERSONAS)
def test_everyone_signed_in_reads_their_quota(api, persona):
    assert api(persona).get("/api/v1/quota").status_code == OWN_READ[persona]


def test_the_quota_shows_limits_and_derived_usage(api, alice, demo):
    Quota.objects.create(user=alice, max_cores=10, max_clusters=3)
    lab = Group.objects.create(name="lab")
    alice.groups.add(lab)
    Quota.objects.create(group=lab, max_disks=20)
    make_network()
    make_node(cores=8, memory_mb=8192, disks={"hdd": 4})
    reserve(make_cluster(alice, demo, size=1).id)

    body = api("owner").get("/api/v1/quota").json()
    assert body["user"]["scope"] == "user alice"
    assert body["user"]["limits"]["max_cores"] == 10
    assert body["user"]["limits"]["max_disks"] is None  # unlimited
    assert body["user"]["used"]["max_cores"] == 2 and body["user"]["used"]["max_clusters"] == 1
    assert body["user"]["used"]["max_disks_hdd"] == 2
    assert body["groups"] == [
        {"scope": "group lab", "limits": body["groups"][0]["limits"], "used": body["user"]["used"]}
    ]
    assert body["groups"][0]["limits"]["max_disks"] == 20


def test_without_a_quota_row_the_defaults_apply(api, settings):
    body = api("other").get("/api/v1/quota").json()
    assert (
        body["user"]["limits"]["max_clusters"] == settings.SCHEDULER_DEFAULT_QUOTA["max_clusters"]
    )
    assert body["groups"] == []


@pytest.mark.parametrize("persona", PERSONAS)
def test_tokens_are_listed_and_created_by_their_owner(api, persona):
    assert api(persona).get("/api/v1/tokens").status_code == OWN_READ[persona]
    response = api(persona).post("/api/v1/tokens", {"name": "ci"}, format="json")
    assert response.status_code == OWN_WRITE[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_a_token_is_revoked_only_by_its_owner(api, alice, persona):
    token = issue_token(alice, "victim").token
    response = api(persona).delete(f"/api/v1/tokens/{token.id}")
    expected = {**OWN_READ, "owner": 204, "other": 404, "admin": 404, "read_only": 403}
    assert response.status_code == expected[persona]
    token.refresh_from_db()
    assert token.is_revoked == (persona == "owner")


def test_a_new_token_is_shown_once_and_works(api, alice):
    response = api("owner").post(
        "/api/v1/tokens", {"name": "ci", "read_only": True, "expires_in_days": 1}, format="json"
    )
    body = response.json()
    assert body["token"].startswith(f"plt_{body['prefix']}_")
    assert body["read_only"] and body["state"] == "active" and body["expires_at"]
    listed = api("owner").get("/api/v1/tokens").json()["results"]
    assert "token" not in listed[0] and "digest" not in listed[0]
    assert {t["state"] for t in listed} == {"active", "expired", "revoked"}

    from rest_framework.test import APIClient

    fresh = APIClient()
    fresh.credentials(HTTP_AUTHORIZATION=f"Bearer {body['token']}")
    assert fresh.get("/api/v1/quota").status_code == 200
    assert fresh.post("/api/v1/tokens", {"name": "x"}, format="json").status_code == 403
    assert ApiToken.objects.get(id=body["id"]).last_used is not None
