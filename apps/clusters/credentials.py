"""Per-cluster credentials: made once per cluster with `secrets`, handed to its containers as
environment variables, shown only to its owner and staff.

Products read them from the environment at start (deploy/images/*/start scripts):
``PLATTER_AUTH_USER`` and ``PLATTER_AUTH_PASSWORD`` are the owner's login (Cassandra role,
MongoDB user), ``PLATTER_AUTH_SECRET`` is shared by the cluster's own daemons (Spark's
``spark.authenticate.secret``, MongoDB's replica set key file). ``PLATTER_UI_TOKEN`` is the
token a web UI that authenticates requires (JupyterLab's), given only to the instances serving
such a UI (access.web_ui_environment): the portal's proxy adds it to every request upstream,
and it is never shown to anyone, the owner included.

A cluster that reuses a destroyed cluster's data gets that cluster's credentials back: the
product's own user tables live on those disks. Its UI token is new: no disk keeps it.
"""

from __future__ import annotations

import re
import secrets

from django.db import IntegrityError, transaction

from .models import Cluster, ClusterCredentials

ENV_USER = "PLATTER_AUTH_USER"
ENV_PASSWORD = "PLATTER_AUTH_PASSWORD"  # noqa: S105 (a variable name)
ENV_SECRET = "PLATTER_AUTH_SECRET"  # noqa: S105 (a variable name)
ENV_UI_TOKEN = "PLATTER_UI_TOKEN"  # noqa: S105 (a variable name)
# Names products keep for themselves (Cassandra's default superuser, MongoDB's built-ins).
RESERVED_USERNAMES = frozenset({"cassandra", "admin", "root", "system", "local", "config"})
MASK = "********"


def username_for(owner_name: str) -> str:
    """A login every product accepts as a plain identifier: lower case letters, digits and _,
    starting with a letter, never a name the product keeps for itself."""
    name = re.sub(r"[^a-z0-9_]+", "_", owner_name.lower()).strip("_")[:32]
    if not name or not name[0].isalpha():
        name = f"u_{name}"[:32].rstrip("_") or "platter"
    return f"{name}_user" if name in RESERVED_USERNAMES else name


def _fresh(cluster: Cluster) -> dict[str, str]:
    # URL- and shell-safe alphabets: the strings go into mongodb:// URLs and shell commands.
    return {
        "username": username_for(cluster.owner.get_username()),
        "password": secrets.token_urlsafe(24),
        "secret": secrets.token_hex(32),
        "ui_token": secrets.token_hex(32),
    }


def _inherited(cluster: Cluster) -> dict[str, str] | None:
    """The credentials of the cluster whose data this one reuses (following the chain)."""
    seen = {cluster.id}
    origin = cluster.reuse_data_of
    while origin is not None and origin.id not in seen:
        found = ClusterCredentials.objects.filter(cluster=origin).first()
        if found is not None:
            return {
                "username": found.username,
                "password": found.password,
                "secret": found.secret,
                "ui_token": secrets.token_hex(32),
            }
        seen.add(origin.id)
        origin = origin.reuse_data_of
    return None


def ensure_credentials(cluster: Cluster) -> ClusterCredentials:
    """The cluster's credentials, made on first call (at launch, when its containers are
    planned). Safe to call concurrently: the one-to-one key keeps one row."""
    found = ClusterCredentials.objects.filter(cluster=cluster).first()
    if found is not None:
        return found
    values = _inherited(cluster) or _fresh(cluster)
    try:
        with transaction.atomic():
            return ClusterCredentials.objects.create(cluster=cluster, **values)
    except IntegrityError:  # another worker made them first
        return ClusterCredentials.objects.get(cluster=cluster)


def credentials_of(cluster: Cluster) -> ClusterCredentials | None:
    """The stored credentials, or None before the cluster was first placed."""
    if Cluster.credentials.is_cached(cluster):  # joined by the query (the API's detail)
        try:
            return cluster.credentials
        except ClusterCredentials.DoesNotExist:
            return None
    return ClusterCredentials.objects.filter(cluster=cluster).first()


def may_see(cluster: Cluster, viewer) -> bool:
    """Only the owner and staff are shown a cluster's credentials."""
    if viewer is None or not getattr(viewer, "is_authenticated", False):
        return False
    return viewer.is_staff or viewer.pk == cluster.owner_id


def environment(found: ClusterCredentials) -> dict[str, str]:
    return {ENV_USER: found.username, ENV_PASSWORD: found.password, ENV_SECRET: found.secret}


def ui_token_environment(found: ClusterCredentials) -> dict[str, str]:
    """PLATTER_UI_TOKEN, for an instance serving a UI that requires it (and its probes)."""
    return {ENV_UI_TOKEN: found.ui_token} if found.ui_token else {}


def redact(text: str, found: ClusterCredentials | None) -> str:
    """``text`` with the cluster's password, secret and UI token masked, for anything quoting
    a product's output (a configure step's last lines, a container's log)."""
    if found is None:
        return text
    for value in (found.password, found.secret, found.ui_token):
        if value:
            text = text.replace(value, MASK)
    return text
