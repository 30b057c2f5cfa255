"""The directory sign-in's settings: off unless the environment names a server, wired into
AUTHENTICATION_BACKENDS after the local accounts' backend when it does, and clear errors for
values the backends could not use."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from portal.env import EnvError
from portal.settings.directory import LDAP_BACKEND, OIDC_BACKEND, directory_settings

from .conftest import GROUPS, PEOPLE
from .provider import Provider

LOCAL = ["portal.signin.LockoutBackend", "django.contrib.auth.backends.ModelBackend"]


def settings_in_a_fresh_process(**env: str) -> dict:
    """Load portal.settings.test in a new interpreter with only `env` for the directory, and
    report what it made of it."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("PLATTER_LDAP_", "PLATTER_OIDC_"))
    }
    code = (
        "import json, django; django.setup(); from django.conf import settings as s;"
        "print(json.dumps({'backends': s.AUTHENTICATION_BACKENDS, 'ldap': s.LDAP_ENABLED,"
        " 'oidc': s.OIDC_ENABLED, 'user_search': [getattr(s.AUTH_LDAP_USER_SEARCH, name, None)"
        " for name in ('base_dn', 'filterstr')] if s.LDAP_ENABLED else None}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env, "DJANGO_SETTINGS_MODULE": "portal.settings.test"},
        capture_output=True,
        text=True,
        check=False,
        cwd=settings.BASE_DIR,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def no_directory_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("PLATTER_LDAP_", "PLATTER_OIDC_")):
            monkeypatch.delenv(name)


def test_the_directory_is_off_by_default():
    loaded = settings_in_a_fresh_process()

    assert loaded["backends"] == LOCAL
    assert (loaded["ldap"], loaded["oidc"]) == (False, False)


def test_with_the_directory_off_the_sign_in_page_has_only_the_local_form(client, db):
    page = client.get("/accounts/login/").content.decode()

    assert "directory" not in page and "/accounts/oidc/" not in page
    assert client.get("/accounts/oidc/authenticate/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404


def test_the_environment_turns_both_on_after_the_local_accounts():
    loaded = settings_in_a_fresh_process(
        PLATTER_LDAP_SERVER_URI="ldaps://ldap.example.org",
        PLATTER_LDAP_USER_SEARCH_BASE=PEOPLE,
        PLATTER_LDAP_USER_FILTER="(mail=%(user)s)",
        **Provider.env_for("http://id.example.org"),
    )

    assert loaded["backends"] == [*LOCAL, LDAP_BACKEND, OIDC_BACKEND]
    assert (loaded["ldap"], loaded["oidc"]) == (True, True)
    assert loaded["user_search"] == [PEOPLE, "(mail=%(user)s)"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "set PLATTER_LDAP_USER_SEARCH_BASE"),
        (
            {"PLATTER_LDAP_USER_SEARCH_BASE": PEOPLE, "PLATTER_LDAP_GROUPS": "cn=x => y"},
            "need PLATTER_LDAP_GROUP_SEARCH_BASE",
        ),
        (
            {
                "PLATTER_LDAP_USER_SEARCH_BASE": PEOPLE,
                "PLATTER_LDAP_GROUP_SEARCH_BASE": GROUPS,
                "PLATTER_LDAP_GROUPS": f"cn=physics,{GROUPS} physics",
            },
            "PLATTER_LDAP_GROUPS: 'cn=physics,ou=groups,dc=example,dc=org physics' is not "
            "'DIRECTORY GROUP => platter group'",
        ),
        (
            {
                "PLATTER_LDAP_USER_SEARCH_BASE": PEOPLE,
                "PLATTER_LDAP_GROUP_SEARCH_BASE": GROUPS,
                "PLATTER_LDAP_STAFF_GROUPS": "platter-admins",
            },
            "PLATTER_LDAP_STAFF_GROUPS: 'platter-admins' is not a DN",
        ),
        (
            {
                "PLATTER_LDAP_USER_SEARCH_BASE": PEOPLE,
                "PLATTER_LDAP_GROUP_SEARCH_BASE": GROUPS,
                "PLATTER_LDAP_GROUP_TYPE": "teams",
            },
            "PLATTER_LDAP_GROUP_TYPE='teams' is not one of groupOfNames",
        ),
        (
            {"PLATTER_LDAP_USER_SEARCH_BASE": PEOPLE, "PLATTER_LDAP_USER_ATTRS": "phone=mobile"},
            "PLATTER_LDAP_USER_ATTRS: 'phone=mobile' is not FIELD=attribute",
        ),
    ],
)
def test_ldap_values_it_cannot_use_are_refused_naming_the_variable(
    monkeypatch, no_directory_env, env, message
):
    monkeypatch.setenv("PLATTER_LDAP_SERVER_URI", "ldap://ldap.example.org")
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(EnvError, match=message.replace("(", r"\(").replace(")", r"\)")):
        directory_settings()


def test_an_incomplete_oidc_configuration_names_what_is_missing(monkeypatch, no_directory_env):
    monkeypatch.setenv("PLATTER_OIDC_CLIENT_ID", "platter")
    monkeypatch.setenv("PLATTER_OIDC_TOKEN_ENDPOINT", "https://id.example.org/token")

    with pytest.raises(EnvError) as refused:
        directory_settings()

    assert str(refused.value) == (
        "PLATTER_OIDC_CLIENT_ID is set: also set PLATTER_OIDC_AUTHORIZATION_ENDPOINT, "
        "PLATTER_OIDC_USERINFO_ENDPOINT, PLATTER_OIDC_ISSUER, PLATTER_OIDC_JWKS_ENDPOINT"
    )


def test_oidc_without_an_issuer_is_refused(monkeypatch, no_directory_env):
    for name, value in Provider.env_for("https://id.example.org").items():
        if name != "PLATTER_OIDC_ISSUER":
            monkeypatch.setenv(name, value)

    with pytest.raises(EnvError, match=r"also set PLATTER_OIDC_ISSUER$"):
        directory_settings()


def test_mappings_take_semicolons_or_lines(monkeypatch, no_directory_env):
    monkeypatch.setenv("PLATTER_LDAP_SERVER_URI", "ldap://ldap.example.org")
    monkeypatch.setenv("PLATTER_LDAP_USER_DN_TEMPLATE", f"uid=%(user)s,{PEOPLE}")
    monkeypatch.setenv("PLATTER_LDAP_GROUP_SEARCH_BASE", GROUPS)
    monkeypatch.setenv(
        "PLATTER_LDAP_GROUPS", f"cn=a,{GROUPS} => a; cn=b,{GROUPS}=>b\ncn=c,{GROUPS} => c"
    )

    derived = directory_settings()

    assert derived["LDAP_GROUP_MAPPING"]["groups"] == {
        f"cn=a,{GROUPS}": "a",
        f"cn=b,{GROUPS}": "b",
        f"cn=c,{GROUPS}": "c",
    }
    # A DN template and no service account: searches run as the user signing in.
    assert derived["AUTH_LDAP_BIND_AS_AUTHENTICATING_USER"] is True
    assert "AUTH_LDAP_USER_SEARCH" not in derived
