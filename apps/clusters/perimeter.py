"""The perimeter: which sources may reach a cluster's ports, as each node's firewall enforces it.

A cluster's ports answer its own members, the portal (PERIMETER_PORTAL_SOURCES, and on a lab
segment the address the portal's proxy binds there, Network.portal_source), the site's bastion
or VPN range (PERIMETER_SITE_SOURCES) and the sources its owner allows
(Cluster.allowed_sources). SSH (22) answers everyone: it takes only the owner's keys. Anything
else is refused, as cloud firewalls and security groups do by default: a product port that
grants control without credentials (JupyterLab, YARN's REST, WebHDFS) is nobody else's.

Each node gets one nftables table of this portal's own (`table_name`) with the rules for the
instances it hosts, replaced whole in one transaction (`NodeRules.script`), so a node never
holds half a rule set and the machine's other tables are never touched. It hooks:
- output: what the node itself sends (in the lab the host stands for the site network, so
  "another person on the site" is the host's own address on the segment);
- ingress on each network parent: what arrives from the site network (a real node's NIC).
workers/perimeter.py applies it through the node layer before containers start, after they
go, when an owner changes the list, and from the reconciler.
"""

import hashlib
import ipaddress
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from apps.inventory.models import Node
from apps.tasks import bus

from .models import Cluster, Instance
from .transitions import record_event

SSH_PORT = 22
DEVICE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")  # a Linux interface name


class SourceError(ValueError):
    """An allow-list entry that is not a source; the message names it."""


def parse_sources(values: Iterable[str] | str) -> list[str]:
    """An owner's allow-list, normalised: IPv4 addresses or CIDRs ("10.1.2.3", "10.8.0.0/16"),
    given as a list or as one string split on commas and white space; sorted, no duplicates.
    Raises SourceError naming the first entry that is none, or a list that is too long."""
    if isinstance(values, str):
        values = values.replace(",", " ").split()
    if not isinstance(values, list | tuple):
        raise SourceError("give a list of IPv4 addresses or CIDRs, or one text of them")
    sources: set[ipaddress.IPv4Network] = set()
    for value in values:
        if not isinstance(value, str):
            raise SourceError(f"{_brief(value)} is not an address or CIDR (e.g. 10.1.2.0/24)")
        text = value.strip()
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise SourceError(
                f"{_brief(text)} is not an IPv4 address or CIDR (e.g. 10.1.2.0/24)"
            ) from None
        if network.version != 4:
            raise SourceError(f"{_brief(text)} is IPv6: cluster networks are IPv4 only")
        sources.add(network)
    limit = settings.PERIMETER_MAX_SOURCES
    if len(sources) > limit:
        raise SourceError(f"{len(sources)} sources: an allow-list holds at most {limit}")
    return [
        str(net)
        for net in sorted(sources, key=lambda net: (int(net.network_address), net.prefixlen))
    ]


def _brief(value: object) -> str:
    """An entry as a message shows it: quoted, and cut when it is long (it is the sender's)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def site_sources() -> list[str]:
    """Every cluster lets these in: the portal's hosts and the site's bastion or VPN range."""
    return parse_sources([*settings.PERIMETER_PORTAL_SOURCES, *settings.PERIMETER_SITE_SOURCES])


def table_name(node_name: str, site: str = "") -> str:
    """This portal's (or `site`'s) table on that node; the nodes of the lab share one host,
    so each node's name is in it."""
    return "platter_" + _word(f"{site or settings.PLATTER_SITE}_{node_name}")


def tables_of_nodes(node_names: Iterable[str], site: str = "") -> str:
    """A regular expression for the tables of these nodes: of one site, or of every site."""
    sites = _word(site) if site else "[a-z0-9_]+"
    return rf"platter_{sites}_({'|'.join(_word(name) for name in node_names)})"


def _word(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "_", text.lower())


@dataclass(frozen=True)
class Guarded:
    """One instance's address, the sources that reach its ports, and where its traffic from
    the site network arrives on the node (its network's parent device; "" for none)."""

    address: str
    sources: tuple[str, ...]
    parent: str


@dataclass(frozen=True)
class NodeRules:
    table: str
    guarded: tuple[Guarded, ...]

    def script(self) -> str:
        """The nft script that replaces the table whole (or removes it: nothing to guard)."""
        lines = [f"table inet {self.table} {{}}", f"delete table inet {self.table}"]
        if not self.guarded:
            return "\n".join(lines) + "\n"
        every = _set(g.address for g in self.guarded)
        lines += [f"table inet {self.table} {{", "\tchain allow {"]
        lines += [f"\t\ttcp dport {SSH_PORT} accept", "\t\ticmp type echo-request accept"]
        for guarded in self.guarded:
            if guarded.sources:
                sources = _set(guarded.sources)
                lines.append(f"\t\tip daddr {guarded.address} ip saddr {sources} accept")
        lines += [
            "\t}",
            "\tchain output {",
            "\t\ttype filter hook output priority filter; policy accept;",
            # Answers to connections a member opened (to a driver on this host, say).
            f"\t\tip daddr {every} ct state established,related accept",
            f"\t\tip daddr {every} jump allow",
            f"\t\tip daddr {every} meta l4proto tcp reject with tcp reset",
            f"\t\tip daddr {every} reject with icmpx type admin-prohibited",
            "\t}",
        ]
        by_parent: dict[str, list[str]] = defaultdict(list)
        for guarded in self.guarded:
            if guarded.parent:
                by_parent[guarded.parent].append(guarded.address)
        for number, (parent, addresses) in enumerate(sorted(by_parent.items())):
            on_parent = _set(addresses)
            lines += [
                f"\tchain ingress_{number} {{",
                f'\t\ttype filter hook ingress device "{parent}" priority filter; policy accept;',
                f"\t\tip daddr {on_parent} jump allow",
                f"\t\tip daddr {on_parent} drop",
                "\t}",
            ]
        lines.append("}")
        return "\n".join(lines) + "\n"

    def digest(self) -> str:
        return hashlib.sha256(self.script().encode()).hexdigest()[:16]


def _set(items: Iterable[str]) -> str:
    return "{ " + ", ".join(sorted(set(items))) + " }"


def node_rules(node: Node) -> NodeRules:
    """The rules a node must hold now: one Guarded per active instance placed there."""
    table = table_name(node.name)
    if not settings.PERIMETER:
        return NodeRules(table, ())
    here = list(
        Instance.objects.filter(node=node, active=True)
        .exclude(address=None)
        .exclude(cluster__state=Cluster.State.DESTROYED)
        .select_related("address__network", "cluster")
        .order_by("address__ip")
    )
    members: dict[int, set[str]] = defaultdict(set)
    rows = (
        Instance.objects.filter(cluster_id__in={i.cluster_id for i in here}, active=True)
        .exclude(address=None)
        .values_list("cluster_id", "address__ip")
    )
    for cluster_id, ip in rows:
        members[cluster_id].add(f"{ip}/32")
    site = site_sources()
    guarded = []
    for instance in here:
        address = instance.address
        assert address is not None  # excluded above
        network = address.network
        sources = {*members[instance.cluster_id], *site, *instance.cluster.allowed_sources}
        if network.portal_source:
            sources.add(f"{network.portal_source}/32")
        parent = network.parent or node.network_parent
        guarded.append(
            Guarded(
                address.ip,
                tuple(sorted(sources)),
                parent if DEVICE_NAME.match(parent or "") else "",
            )
        )
    return NodeRules(table, tuple(guarded))


def nodes_of(cluster_id: int) -> list[Node]:
    """The nodes holding any of the cluster's instances."""
    ids = Instance.objects.filter(cluster_id=cluster_id).exclude(node=None).values("node_id")
    return list(Node.objects.filter(id__in=ids).order_by("name"))


def set_allowed_sources(cluster_id: int, values: Iterable[str] | str, by: str) -> list[str]:
    """The owner's new allow-list (replacing the old one), recorded as an event; the nodes get
    the rules once this commits (workers/perimeter.py). Raises SourceError for a bad entry or a
    cluster on its way out."""
    sources = parse_sources(values)
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        if cluster.state in (Cluster.State.DESTROYING, Cluster.State.DESTROYED):
            raise SourceError(f"the cluster is {cluster.state}: its allow-list cannot change")
        if sources == cluster.allowed_sources:
            return sources
        Cluster.objects.filter(id=cluster_id).update(allowed_sources=sources)
        shown = ", ".join(sources) or "none (its members, the portal and SSH only)"
        record_event(cluster_id, f"allowed sources set to {shown} by {by}")
        bus.dispatch(bus.APPLY_PERIMETER, cluster_id)
    return sources


def sources_for_display(cluster: Cluster) -> dict[str, list[str]]:
    """What reaches the cluster's ports besides its members, for its page and the API."""
    return {
        "allowed_sources": list(cluster.allowed_sources),
        "site_sources": site_sources(),
    }
