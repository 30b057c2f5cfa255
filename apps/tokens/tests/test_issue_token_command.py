from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.tokens.models import ApiToken
from apps.tokens.services import check_token

pytestmark = pytest.mark.django_db


def issue(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("issue_token", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def test_it_prints_only_the_token_on_stdout(alice):
    secret, note = issue("alice")
    token = check_token(secret)
    assert token.user == alice and token.name == "cli" and not token.read_only
    assert token.expires_at is None and "read-write" in note and token.prefix in note


def test_it_takes_a_name_an_expiry_and_a_read_only_scope(alice):
    secret, note = issue("alice", "--name", "ci", "--expires-in", "7", "--read-only")
    token = check_token(secret)
    assert (token.name, token.read_only) == ("ci", True)
    assert token.expires_at is not None and "read-only" in note


def test_it_refuses_unknown_users_and_past_expiry(alice):
    with pytest.raises(CommandError, match="no user"):
        issue("nobody")
    with pytest.raises(CommandError, match="future"):
        issue("alice", "--expires-in", "-1")
    assert ApiToken.objects.count() == 0
