"""A real directory for the sign-in tests: Debian's slapd with people and groups, and a small
OpenID Connect provider; the portal configured for them through the same PLATTER_LDAP_* /
PLATTER_OIDC_* variables a site sets."""

import pytest

from portal.settings.directory import directory_settings

from .provider import Provider
from .slapd import SERVICE_DN, SERVICE_PASSWORD, SUFFIX, Slapd

PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
# uid => (given name, surname, password)
USERS = {
    "dora": ("Dora", "Directory", "dora-dir-pass"),
    "eve": ("Eve", "Elsewhere", "eve-dir-pass"),
    "gina": ("Gina", "Groups", "gina-dir-pass"),
    "frank": ("Frank", "Admin", "frank-dir-pass"),
    "alice": ("Alice", "Namesake", "alice-dir-pass"),  # the local persona's name, not hers
}
# cn => members
MEMBERS = {
    "physics": ["dora", "gina"],
    "chemistry": ["eve"],
    "platter-admins": ["frank"],
    "unmapped": ["dora"],
}


def _entry(dn: str, **attributes: str | list[str]) -> str:
    lines = [f"dn: {dn}"]
    for name, values in attributes.items():
        for value in [values] if isinstance(values, str) else values:
            lines.append(f"{name}: {value}")
    return "\n".join(lines) + "\n"


def directory_ldif() -> str:
    entries = [
        _entry(SUFFIX, objectClass=["dcObject", "organization"], dc="example", o="Example"),
        _entry(PEOPLE, objectClass="organizationalUnit", ou="people"),
        _entry(GROUPS, objectClass="organizationalUnit", ou="groups"),
        _entry(f"ou=services,{SUFFIX}", objectClass="organizationalUnit", ou="services"),
        _entry(
            SERVICE_DN,
            objectClass=["organizationalRole", "simpleSecurityObject"],
            cn="platter",
            userPassword=SERVICE_PASSWORD,
        ),
    ]
    for uid, (given, surname, password) in USERS.items():
        entries.append(
            _entry(
                f"uid={uid},{PEOPLE}",
                objectClass="inetOrgPerson",
                uid=uid,
                cn=f"{given} {surname}",
                givenName=given,
                sn=surname,
                mail=f"{uid}@directory.example.org",
                userPassword=password,
            )
        )
    for cn, members in MEMBERS.items():
        entries.append(
            _entry(
                f"cn={cn},{GROUPS}",
                objectClass="groupOfNames",
                cn=cn,
                member=[f"uid={uid},{PEOPLE}" for uid in members],
            )
        )
    return "\n".join(entries)


@pytest.fixture(scope="session")
def slapd(tmp_path_factory):
    server = Slapd(tmp_path_factory.mktemp("slapd"))
    server.start()
    try:
        server.add(directory_ldif())
        yield server
    finally:
        server.stop()


def ldap_env(server: Slapd) -> dict[str, str]:
    """What a site sets: its server, the portal's service account, where people and groups
    are, and which groups map to quota groups and staff."""
    return {
        "PLATTER_LDAP_SERVER_URI": server.uri,
        "PLATTER_LDAP_BIND_DN": SERVICE_DN,
        "PLATTER_LDAP_BIND_PASSWORD": SERVICE_PASSWORD,
        "PLATTER_LDAP_USER_SEARCH_BASE": PEOPLE,
        "PLATTER_LDAP_GROUP_SEARCH_BASE": GROUPS,
        # Spaces and capitals as people write DNs: compared as DNs, not as strings.
        "PLATTER_LDAP_GROUPS": f"cn=physics, {GROUPS} => physics; CN=Chemistry,{GROUPS} => chem",
        "PLATTER_LDAP_STAFF_GROUPS": f"cn=platter-admins,{GROUPS}",
    }


def configure(settings, monkeypatch, env: dict[str, str]) -> None:
    """Set the environment, then the settings base.py would derive from it."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    derived = directory_settings()
    backends = derived.pop("DIRECTORY_BACKENDS")
    for name, value in derived.items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, *backends]


@pytest.fixture
def ldap_on(db, settings, monkeypatch, slapd) -> Slapd:
    configure(settings, monkeypatch, ldap_env(slapd))
    return slapd


@pytest.fixture(scope="session")
def provider():
    server = Provider()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def oidc_on(db, settings, monkeypatch, provider) -> Provider:
    configure(
        settings,
        monkeypatch,
        {
            **provider.env(),
            "PLATTER_OIDC_NAME": "Example ID",
            "PLATTER_OIDC_GROUPS": "physics => physics; chemistry => chem",
            "PLATTER_OIDC_STAFF_GROUPS": "platter-admins",
        },
    )
    provider.audience = provider.env()["PLATTER_OIDC_CLIENT_ID"]
    provider.signing_key = provider.key
    provider.id_token_claims = {}
    provider.token_issuer = None
    return provider
