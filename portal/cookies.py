"""Cookie names: one rule for the portal's and the UI hosts' cookies.

A Secure cookie is named ``__Host-<name>``. Browsers take such a cookie only when it is Secure,
has no Domain and is for Path=/ (RFC 6265bis, "cookie name prefixes"), so no other host of
the same site (a cluster's UI host runs its tenant's scripts, and is the same *site* as the
portal) can plant or shadow one: no session or CSRF token fixed from a tenant's page. A cookie
that is not Secure (development over plain http) keeps its plain name: browsers refuse a
``__Host-`` cookie without Secure.
"""

HOST_PREFIX = "__Host-"


def host_only_name(name: str, secure: bool) -> str:
    """``__Host-<name>`` for a Secure cookie, ``name`` for one that is not."""
    return f"{HOST_PREFIX}{name}" if secure else name
