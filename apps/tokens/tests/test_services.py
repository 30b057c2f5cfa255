"""Issuing, checking and revoking tokens: only a digest is stored."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.tokens.models import ApiToken
from apps.tokens.services import (
    TokenExpired,
    TokenInvalid,
    check_token,
    digest_of,
    issue_token,
    revoke,
)

pytestmark = pytest.mark.django_db


def test_it_stores_only_a_digest_and_the_prefix(alice):
    issued = issue_token(alice, "laptop")
    row = ApiToken.objects.get(id=issued.token.id)
    assert issued.secret.startswith(f"plt_{row.prefix}_")
    assert row.digest == digest_of(issued.secret) and issued.secret not in row.digest
    # The secret is URL-safe base64 and may itself contain "_": cut after the prefix.
    secret_part = issued.secret.removeprefix(f"plt_{row.prefix}_")
    assert len(secret_part) == 43
    stored = [str(v) for v in ApiToken.objects.filter(id=row.id).values().first().values()]
    assert not any(secret_part in value for value in stored)


def test_it_finds_the_user_and_records_use(alice):
    issued = issue_token(alice, "laptop")
    assert check_token(issued.secret).user == alice
    first = ApiToken.objects.get(id=issued.token.id).last_used
    assert first is not None
    check_token(issued.secret)  # within a minute: no second write
    assert ApiToken.objects.get(id=issued.token.id).last_used == first


def test_a_secret_with_underscores_and_dashes_still_checks(alice, monkeypatch):
    # URL-safe secrets draw "_" and "-" too; only the first two "_" separate the parts.
    monkeypatch.setattr("apps.tokens.services.secrets.token_urlsafe", lambda n: "_a-b_" + "c" * 38)
    issued = issue_token(alice, "laptop")
    assert check_token(issued.secret).user == alice
    with pytest.raises(TokenInvalid):
        check_token(issued.secret.replace("_a-b_", "_a-b-"))


@pytest.mark.parametrize(
    "raw", ["", "plt", "plt__", "plt_abcd", "xyz_12345678_secret", "plt_00000000_secret"]
)
def test_it_rejects_malformed_and_unknown_tokens(db, raw):
    with pytest.raises(TokenInvalid):
        check_token(raw)


def test_it_rejects_a_token_whose_secret_differs(alice):
    issued = issue_token(alice, "laptop")
    with pytest.raises(TokenInvalid):
        check_token(issued.secret[:-1] + ("A" if issued.secret[-1] != "A" else "B"))


def test_it_rejects_expired_revoked_and_inactive(alice):
    expiring = issue_token(alice, "short", expires_in_days=1)
    assert expiring.token.expires_at > timezone.now() + timedelta(hours=23)
    ApiToken.objects.filter(id=expiring.token.id).update(expires_at=timezone.now())
    with pytest.raises(TokenExpired):
        check_token(expiring.secret)

    revoked = issue_token(alice, "gone")
    assert revoke(revoked.token.id) and not revoke(revoked.token.id)
    with pytest.raises(TokenInvalid, match="revoked"):
        check_token(revoked.secret)

    active = issue_token(alice, "still")
    alice.is_active = False
    alice.save()
    with pytest.raises(TokenInvalid):
        check_token(active.secret)


def test_expiry_must_be_in_the_future(alice):
    with pytest.raises(ValueError, match="future"):
        issue_token(alice, "bad", expires_in_days=0)
