"""A token made with a token goes when its maker goes: revoking a token (DELETE
/api/v1/tokens/<id>, the tokens page, the admin) revokes every token a request with it made,
and theirs, so a leaked token's offspring stop working with it."""

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token

from .conftest import bearer

pytestmark = pytest.mark.django_db

QUOTA = "/api/v1/quota"


def mint(secret: str, name: str) -> dict:
    """What POST /api/v1/tokens answers a request made with ``secret``."""
    response = bearer(secret).post("/api/v1/tokens", {"name": name}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def works(secret: str) -> bool:
    return bearer(secret).get(QUOTA).status_code == 200


@pytest.fixture
def family(alice):
    """alice's "leaked" token, a child it made and a grandchild the child made; and a token
    alice made herself, signed in, which is no one's child."""
    leaked = issue_token(alice, "leaked")
    child = mint(leaked.secret, "child")
    grandchild = mint(child["token"], "grandchild")
    own = issue_token(alice, "laptop")
    return {"leaked": leaked, "child": child, "grandchild": grandchild, "own": own}


def test_revoking_a_token_revokes_what_it_made_and_what_those_made(client, alice, family):
    assert all(works(t) for t in (family["child"]["token"], family["grandchild"]["token"]))
    client.force_login(alice)

    answer = client.delete(f"/api/v1/tokens/{family['leaked'].token.id}")

    assert answer.status_code == 204
    for secret in (family["leaked"].secret, family["child"]["token"]):
        refused = bearer(secret).get(QUOTA)
        assert refused.status_code == 401
        # ...and none of them can make a new one to escape with.
        assert (
            bearer(secret).post("/api/v1/tokens", {"name": "x"}, format="json").status_code == 401
        )
    assert not works(family["grandchild"]["token"])
    assert works(family["own"].secret)  # made by alice herself: not part of the family
    listed = {t["name"]: t["revoked_at"] for t in client.get("/api/v1/tokens").json()["results"]}
    assert listed["child"] and listed["grandchild"] and listed["leaked"]
    assert listed["laptop"] is None
    # The audit log says which revocation took the offspring along.
    along = AuditEvent.objects.filter(action="token.revoke", detail__along_with__isnull=False)
    assert {e.detail["name"] for e in along} == {"child", "grandchild"}
    assert {e.detail["along_with"] for e in along} == {family["leaked"].token.prefix}


def test_revoking_a_child_leaves_its_maker_and_siblings_working(family):
    sibling = mint(family["leaked"].secret, "sibling")

    answer = bearer(family["leaked"].secret).delete(f"/api/v1/tokens/{family['child']['id']}")

    assert answer.status_code == 204
    assert not works(family["child"]["token"]) and not works(family["grandchild"]["token"])
    assert works(family["leaked"].secret) and works(sibling["token"])


def test_a_token_revoked_elsewhere_cannot_mint_from_a_cache_that_still_holds_it(family):
    leaked = family["leaked"]
    assert works(leaked.secret)  # now in this process's token cache, for a few seconds
    # Revoked by another process: a plain UPDATE sends no signal, so this process's cache
    # keeps the token as the web server's other workers would.
    ApiToken.objects.filter(id=leaked.token.id).update(revoked_at=timezone.now())
    before = ApiToken.objects.count()

    answer = bearer(leaked.secret).post("/api/v1/tokens", {"name": "escape"}, format="json")

    assert answer.status_code == 401
    assert "revoked" in answer.json()["message"]
    assert ApiToken.objects.count() == before


def test_revoking_a_token_again_still_takes_a_late_child_along(alice, family):
    # A child made in the instant before its maker was revoked, then the maker revoked again
    # (the admin's bulk action, the page's button twice): the second revocation finds it.
    leaked = family["leaked"]
    ApiToken.objects.filter(id=leaked.token.id).update(revoked_at=timezone.now())
    late = issue_token(alice, "late", made_with=ApiToken.objects.get(id=family["child"]["id"]))
    assert works(late.secret)

    assert (
        bearer(family["own"].secret).delete(f"/api/v1/tokens/{leaked.token.id}").status_code == 204
    )

    assert not works(late.secret) and not works(family["child"]["token"])
