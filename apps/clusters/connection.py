"""How to reach a cluster, built in one place for the web page, the REST API and the CESGA API:
its endpoints, the product's connection strings, its credentials (owner and staff only), the
ssh login and the web UIs the portal proxies.

Connection strings are declared per version in the catalog, on the port they use::

    {"role": "master", "port": 7077, "name": "Spark master",
     "connect": ["spark://{{address}}:{{port}}"]}

Placeholders in ``connect`` templates:

- ``address``, ``hostname``: one instance of the port's role; a template using either gives
  one string per instance of that role, others give one string for the cluster;
- ``port``: the entry's port; ``cluster``: the cluster's name; every product option by name;
- ``<role>_address`` (the role's first instance), ``<role>_addresses`` (all, comma separated),
  ``<role>_endpoints`` (``address:port`` with the entry's port, comma separated);
  ``addresses`` and ``endpoints``: the same over every instance;
- ``user``, ``password``, ``secret``: the cluster's credentials (apps.clusters.credentials).
  A viewer who is neither the owner nor staff sees ``<user>``, ``<password>``, ``<secret>``,
  and so does a caller the front door withholds secrets from (a read-only API token).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from apps.catalog import templating
from apps.catalog.options import OptionsError, resolve

from . import access, credentials
from .models import LIVE_STATES, Cluster, Instance

PER_INSTANCE = frozenset({"address", "hostname"})
SECRET_NAMES = ("user", "password", "secret")


class ConnectTemplateError(ValueError):
    """A catalog connection template names a placeholder nobody fills."""


@dataclass
class ConnectionString:
    name: str  # the port's name in the catalog
    role: str
    hostname: str  # "" when the string is for the whole cluster
    value: str


@dataclass
class Connection:
    endpoints: list[dict] = field(default_factory=list)
    strings: list[ConnectionString] = field(default_factory=list)
    # {"username", "password", "secret"}: only for the owner and staff, once made.
    credentials: dict | None = None
    # True when the cluster has credentials the viewer may not see.
    credentials_hidden: bool = False
    # Why they are hidden when the reason is the caller's, not the viewer's (a read-only token).
    credentials_note: str = ""
    ssh: dict | None = None
    web_uis: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def endpoints(cluster: Cluster) -> list[dict]:
    """Each published port of the version at the address of every instance of its role."""
    found = []
    for port in cluster.definition.ports or []:
        for instance in cluster.instances.all():
            if instance.role != port.get("role"):
                continue
            ip = instance.address.ip if instance.address else None
            scheme = port.get("scheme")
            found.append(
                {
                    "role": instance.role,
                    "hostname": instance.hostname,
                    "name": port.get("name", ""),
                    "address": ip,
                    "port": port["port"],
                    "protocol": port.get("protocol", "tcp"),
                    "url": f"{scheme}://{ip}:{port['port']}" if scheme and ip else None,
                }
            )
    return found


def connection_details(cluster: Cluster, viewer, withheld_because: str = "") -> Connection:
    """Everything the viewer may know about reaching the cluster. Credentials appear only
    for its owner and staff (others get 404 on the page and the API anyway), and not at all
    when `withheld_because` says why this caller gets none (a read-only API token)."""
    details = Connection(endpoints=endpoints(cluster))
    if cluster.state not in LIVE_STATES:
        return details  # destroyed or failed: nothing to connect to
    found = credentials.credentials_of(cluster)
    shown = found is not None and credentials.may_see(cluster, viewer) and not withheld_because
    if found is not None and withheld_because:
        details.credentials_note = withheld_because
    if shown and found is not None:
        details.credentials = {
            "username": found.username,
            "password": found.password,
            "secret": found.secret,
        }
    details.credentials_hidden = found is not None and not shown
    details.strings = connection_strings(cluster, found if shown else None)
    details.ssh = access.ssh_login(cluster) or None
    details.web_uis = list(access.web_uis(cluster) or [])
    return details


def connection_strings(cluster: Cluster, found) -> list[ConnectionString]:
    """The catalog's connection templates of the version, filled for this cluster; with
    ``found`` None the credentials show as <user>, <password>, <secret>."""
    instances = [i for i in cluster.instances.all() if i.address is not None]
    if not instances:
        return []
    base = _cluster_context(cluster, instances, found)
    strings = []
    for port in cluster.definition.ports or []:
        role = port.get("role", "")
        members = [i for i in instances if i.role == role]
        context = {**base, **_port_context(cluster, port["port"], instances)}
        for template in port.get("connect") or []:
            names = templating.placeholders_in(template)
            if names & PER_INSTANCE:
                for instance in members:
                    each = {
                        **context,
                        "address": _ip(instance),
                        "hostname": instance.hostname,
                    }
                    strings.append(
                        ConnectionString(
                            port.get("name", ""), role, instance.hostname, render(template, each)
                        )
                    )
            elif members:
                strings.append(
                    ConnectionString(port.get("name", ""), role, "", render(template, context))
                )
    return strings


def render(template: str, context: dict[str, str]) -> str:
    try:
        return templating.render(template, context)
    except templating.TemplateError as error:
        raise ConnectTemplateError(f"{error} in connection template {template!r}") from None


def _cluster_context(cluster: Cluster, instances: list[Instance], found) -> dict[str, str]:
    try:
        options = resolve(cluster.definition, cluster.options).options
    except OptionsError:  # a version edited since the launch: show what the cluster asked
        options = dict(cluster.options or {})
    context = {name: templating.option_text(value) for name, value in options.items()}
    if found is not None:
        context.update(user=found.username, password=found.password, secret=found.secret)
    else:
        context.update({name: f"<{name}>" for name in SECRET_NAMES})
    context["cluster"] = cluster.name
    return context


def _ip(instance: Instance) -> str:
    """A live instance's address (every placed instance has one)."""
    return instance.address.ip if instance.address is not None else ""


def _port_context(cluster: Cluster, port: int, instances: list[Instance]) -> dict[str, str]:
    context = {
        "port": str(port),
        "addresses": ",".join(_ip(i) for i in instances),
        "endpoints": ",".join(f"{_ip(i)}:{port}" for i in instances),
    }
    for role in [r.get("name", "") for r in cluster.definition.roles or []]:
        ips = [_ip(i) for i in instances if i.role == role]
        context[f"{role}_address"] = ips[0] if ips else ""
        context[f"{role}_addresses"] = ",".join(ips)
        context[f"{role}_endpoints"] = ",".join(f"{ip}:{port}" for ip in ips)
    return context
