"""Sign-in with the site's directory, read from the environment (README: "Sign in with your
directory"). LDAP (django-auth-ldap) is on once PLATTER_LDAP_SERVER_URI is set, OpenID Connect
(mozilla-django-oidc) once PLATTER_OIDC_CLIENT_ID is; with neither, only local accounts sign
in. Not a settings module of its own: base.py adds what `directory_settings()` returns.

Group mappings are "DIRECTORY GROUP => platter group" entries separated by ";" or new lines
(LDAP group DNs hold commas); lists of groups are separated the same way.
"""

from pathlib import Path
from typing import Any

from portal.env import EnvError, envbool, envint, envstr

LDAP_BACKEND = "apps.accounts.ldap_backend.DirectoryLDAPBackend"
OIDC_BACKEND = "apps.accounts.oidc.DirectoryOIDCBackend"

# PLATTER_LDAP_GROUP_TYPE: how the directory records membership, and the filter that finds
# such groups under the group search base.
LDAP_GROUP_TYPES = {
    "groupofnames": ("GroupOfNamesType", "(objectClass=groupOfNames)"),
    "nestedgroupofnames": ("NestedGroupOfNamesType", "(objectClass=groupOfNames)"),
    "groupofuniquenames": ("GroupOfUniqueNamesType", "(objectClass=groupOfUniqueNames)"),
    "posixgroup": ("PosixGroupType", "(objectClass=posixGroup)"),
    "activedirectory": ("ActiveDirectoryGroupType", "(objectClass=group)"),
    "nestedactivedirectory": ("NestedActiveDirectoryGroupType", "(objectClass=group)"),
}
USER_FIELDS = ("first_name", "last_name", "email")


def envitems(name: str) -> list[str]:
    """Entries separated by ";" or new lines (commas belong to DNs)."""
    raw = envstr(name, "")
    return [item.strip() for line in raw.splitlines() for item in line.split(";") if item.strip()]


def envmapping(name: str) -> dict[str, str]:
    """ "directory group => platter group" entries."""
    mapping = {}
    for item in envitems(name):
        key, arrow, value = item.partition("=>")
        if not arrow or not key.strip() or not value.strip():
            raise EnvError(f"{name}: {item!r} is not 'DIRECTORY GROUP => platter group'")
        mapping[key.strip()] = value.strip()
    return mapping


def _group_mapping(prefix: str) -> dict[str, Any]:
    return {
        "groups": envmapping(f"{prefix}_GROUPS"),
        "staff": envitems(f"{prefix}_STAFF_GROUPS"),
        "superuser": envitems(f"{prefix}_SUPERUSER_GROUPS"),
    }


def _user_attrs() -> dict[str, str]:
    raw = envstr("PLATTER_LDAP_USER_ATTRS", "first_name=givenName,last_name=sn,email=mail")
    attrs = {}
    for item in (part.strip() for part in raw.split(",")):
        field, equals, attribute = item.partition("=")
        if not equals or field.strip() not in USER_FIELDS or not attribute.strip():
            raise EnvError(
                f"PLATTER_LDAP_USER_ATTRS: {item!r} is not FIELD=attribute with FIELD one of "
                + ", ".join(USER_FIELDS)
            )
        attrs[field.strip()] = attribute.strip()
    return attrs


def _tls_options(ldap: Any) -> dict[int, Any]:
    """The directory's certificate is always checked (ldaps:// or StartTLS): against
    PLATTER_LDAP_CA_FILE (a site's own CA, PEM) when set, else against the system's CAs, as
    libldap does by default (/etc/ldap/ldap.conf)."""
    ca_file = envstr("PLATTER_LDAP_CA_FILE", "")
    if not ca_file:
        return {}
    if not Path(ca_file).is_file():
        raise EnvError(f"PLATTER_LDAP_CA_FILE={ca_file!r} is not a file")
    return {
        ldap.OPT_X_TLS_REQUIRE_CERT: ldap.OPT_X_TLS_DEMAND,
        ldap.OPT_X_TLS_CACERTFILE: ca_file,
        ldap.OPT_X_TLS_NEWCTX: 0,  # last: makes the TLS context with the options above
    }


def ldap_settings() -> dict[str, Any]:
    """django-auth-ldap's settings, or {} when PLATTER_LDAP_SERVER_URI is not set."""
    uri = envstr("PLATTER_LDAP_SERVER_URI", "")
    if not uri:
        return {}
    # Imported only when LDAP is configured: python-ldap loads the system's libldap.
    import ldap
    import ldap.dn
    from django_auth_ldap import config

    user_base = envstr("PLATTER_LDAP_USER_SEARCH_BASE", "")
    dn_template = envstr("PLATTER_LDAP_USER_DN_TEMPLATE", "")
    if not user_base and not dn_template:
        raise EnvError(
            "PLATTER_LDAP_SERVER_URI is set: set PLATTER_LDAP_USER_SEARCH_BASE (to find users) "
            "or PLATTER_LDAP_USER_DN_TEMPLATE (e.g. uid=%(user)s,ou=people,dc=example,dc=org)"
        )
    bind_dn = envstr("PLATTER_LDAP_BIND_DN", "")
    timeout = envint("PLATTER_LDAP_TIMEOUT", 5)
    result: dict[str, Any] = {
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_BIND_DN": bind_dn,
        "AUTH_LDAP_BIND_PASSWORD": envstr("PLATTER_LDAP_BIND_PASSWORD", ""),
        # With a DN template and no service account, searches (groups) run as the user.
        "AUTH_LDAP_BIND_AS_AUTHENTICATING_USER": bool(dn_template and not bind_dn),
        "AUTH_LDAP_START_TLS": envbool("PLATTER_LDAP_START_TLS", False),
        "AUTH_LDAP_CONNECTION_OPTIONS": {
            ldap.OPT_NETWORK_TIMEOUT: timeout,
            ldap.OPT_TIMEOUT: timeout,
            ldap.OPT_REFERRALS: 0,  # Active Directory's referrals would need another bind
            **_tls_options(ldap),
        },
        "AUTH_LDAP_USER_ATTR_MAP": _user_attrs(),
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "LDAP_GROUP_MAPPING": _group_mapping("PLATTER_LDAP"),
    }
    if dn_template:
        result["AUTH_LDAP_USER_DN_TEMPLATE"] = dn_template
    else:
        user_filter = envstr("PLATTER_LDAP_USER_FILTER", "(uid=%(user)s)")
        result["AUTH_LDAP_USER_SEARCH"] = config.LDAPSearch(
            user_base, ldap.SCOPE_SUBTREE, user_filter
        )
    group_base = envstr("PLATTER_LDAP_GROUP_SEARCH_BASE", "")
    mapping = result["LDAP_GROUP_MAPPING"]
    require_group = envstr("PLATTER_LDAP_REQUIRE_GROUP", "")
    if group_base:
        kind = envstr("PLATTER_LDAP_GROUP_TYPE", "groupOfNames")
        if kind.lower() not in LDAP_GROUP_TYPES:
            raise EnvError(
                f"PLATTER_LDAP_GROUP_TYPE={kind!r} is not one of groupOfNames, "
                "nestedGroupOfNames, groupOfUniqueNames, posixGroup, activeDirectory, "
                "nestedActiveDirectory"
            )
        class_name, default_filter = LDAP_GROUP_TYPES[kind.lower()]
        group_filter = envstr("PLATTER_LDAP_GROUP_FILTER", default_filter)
        result["AUTH_LDAP_GROUP_TYPE"] = getattr(config, class_name)()
        result["AUTH_LDAP_GROUP_SEARCH"] = config.LDAPSearch(
            group_base, ldap.SCOPE_SUBTREE, group_filter
        )
    elif any(mapping.values()) or require_group:
        raise EnvError(
            "PLATTER_LDAP_GROUPS, _STAFF_GROUPS, _SUPERUSER_GROUPS and _REQUIRE_GROUP need "
            "PLATTER_LDAP_GROUP_SEARCH_BASE (where the directory's groups are)"
        )
    for var, dns in (
        ("PLATTER_LDAP_GROUPS", mapping["groups"]),
        ("PLATTER_LDAP_STAFF_GROUPS", mapping["staff"]),
        ("PLATTER_LDAP_SUPERUSER_GROUPS", mapping["superuser"]),
        ("PLATTER_LDAP_REQUIRE_GROUP", [require_group] if require_group else []),
    ):
        for dn in dns:
            if not ldap.dn.is_dn(dn):
                raise EnvError(f"{var}: {dn!r} is not a DN (e.g. cn=staff,ou=groups,dc=example)")
    if require_group:
        result["AUTH_LDAP_REQUIRE_GROUP"] = require_group
    return result


OIDC_REQUIRED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "PLATTER_OIDC_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT": "PLATTER_OIDC_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT": "PLATTER_OIDC_USERINFO_ENDPOINT",
    # Required: ID tokens from any other issuer are refused, and users are bound to (issuer,
    # sub), so the issuer must be named, not taken from whatever token arrives.
    "OIDC_ISSUER": "PLATTER_OIDC_ISSUER",
}


def oidc_settings() -> dict[str, Any]:
    """mozilla-django-oidc's settings and ours, or {} when PLATTER_OIDC_CLIENT_ID is not set."""
    client_id = envstr("PLATTER_OIDC_CLIENT_ID", "")
    if not client_id:
        return {}
    result: dict[str, Any] = {name: envstr(var, "") for name, var in OIDC_REQUIRED.items()}
    algorithm = envstr("PLATTER_OIDC_SIGN_ALGO", "RS256")
    jwks = envstr("PLATTER_OIDC_JWKS_ENDPOINT", "")
    missing = [var for name, var in OIDC_REQUIRED.items() if not result[name]]
    if algorithm.startswith(("RS", "ES")) and not jwks:
        missing.append("PLATTER_OIDC_JWKS_ENDPOINT")
    if missing:
        raise EnvError(f"PLATTER_OIDC_CLIENT_ID is set: also set {', '.join(missing)}")
    result.update(
        {
            "OIDC_RP_CLIENT_ID": client_id,
            # Only the web process needs it (the workers' units may lack the file); empty for
            # a public client, which PKCE protects.
            "OIDC_RP_CLIENT_SECRET": envstr("PLATTER_OIDC_CLIENT_SECRET", ""),
            "OIDC_RP_SIGN_ALGO": algorithm,
            "OIDC_OP_JWKS_ENDPOINT": jwks or None,
            "OIDC_RP_SCOPES": envstr("PLATTER_OIDC_SCOPES", "openid email profile"),
            "OIDC_USE_PKCE": True,
            "OIDC_TIMEOUT": envint("PLATTER_OIDC_TIMEOUT", 10),
            "OIDC_PROVIDER_NAME": envstr("PLATTER_OIDC_NAME", "your organisation"),
            "OIDC_USERNAME_CLAIM": envstr("PLATTER_OIDC_USERNAME_CLAIM", "preferred_username"),
            "OIDC_GROUPS_CLAIM": envstr("PLATTER_OIDC_GROUPS_CLAIM", "groups"),
            "OIDC_GROUP_MAPPING": _group_mapping("PLATTER_OIDC"),
            # Only members of this group (a value of the groups claim) sign in; empty: anyone.
            "OIDC_REQUIRE_GROUP": envstr("PLATTER_OIDC_REQUIRE_GROUP", ""),
        }
    )
    return result


def directory_settings() -> dict[str, Any]:
    """Every setting the directory sign-in needs, with the backends to append to
    AUTHENTICATION_BACKENDS under "DIRECTORY_BACKENDS" (after the local accounts' backend, so
    a local sign-in never waits for the directory)."""
    ldap = ldap_settings()
    oidc = oidc_settings()
    backends = [LDAP_BACKEND] * bool(ldap) + [OIDC_BACKEND] * bool(oidc)
    return {
        **ldap,
        **oidc,
        "LDAP_ENABLED": bool(ldap),
        "OIDC_ENABLED": bool(oidc),
        "DIRECTORY_BACKENDS": backends,
    }
