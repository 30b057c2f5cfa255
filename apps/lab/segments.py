"""The lab's cluster networks: one Linux bridge per segment stands for a site's VLAN.

Each cluster holds one isolated network (apps/inventory Network.isolated) for its lifetime, and
on every node its containers hang off that segment's bridge through a macvlan: containers of
one cluster reach each other across nodes, and nothing of another cluster (a macvlan switches
only between interfaces of the same parent, and the host routes nothing: ip_forward is 0).
802.1q sub-interfaces, which a site would use, cannot be made on this machine kind.

The host reaches a segment through a macvlan "shim" on its bridge with the segment's last
address and a route for its subnet, so a browser or ssh on the host opens cluster addresses
directly, never through the default gateway. That address stands for the site network; the
portal's proxy connects from the shim's second address (portal_address), which the perimeter
lets in (apps/clusters/perimeter.py) while the host's own reaches only SSH and what an owner
allows.

Segments are made for every portal slot at once (the dev portal and parallel test runs each
hand out their own LAB_SEGMENTS_PER_SLOT of them), so `lab up` runs once for all of them. Their
names carry the lab's key (LabSpec.link_prefix), so another lab's links are never touched.
"""

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from . import host
from .homes import lab_of_link
from .nodes import LabSpec, current

FIRST_HOST_INDEX = 9  # .10: the low addresses stay free for a site's own gear


@dataclass(frozen=True)
class Segment:
    index: int
    subnet: ipaddress.IPv4Network
    link_prefix: str  # the lab's (LabSpec.link_prefix)

    @property
    def bridge(self) -> str:
        return f"{self.link_prefix}s{self.index:02d}"

    @property
    def shim(self) -> str:
        return f"{self.link_prefix}h{self.index:02d}"

    @property
    def shim_address(self) -> str:
        return str(self.subnet.broadcast_address - 1)

    @property
    def portal_address(self) -> str:
        """The shim's second address: where the portal's proxy connects from, told apart by
        the perimeter from the host's own (shim_address, which stands for the site)."""
        return str(self.subnet.broadcast_address - 2)

    @property
    def network_name(self) -> str:
        return f"lab-{self.index}"

    def network_fields(self) -> dict:
        hosts = list(self.subnet.hosts())
        return {
            "subnet": str(self.subnet),
            "gateway": str(hosts[0]),
            "first_address": str(hosts[FIRST_HOST_INDEX]),
            "last_address": str(hosts[-5]),
            "isolated": True,
            "parent": self.bridge,
            "vlan": None,
            "portal_source": self.portal_address,
        }


def all_segments(spec: LabSpec | None = None) -> list[Segment]:
    spec = spec or current()
    pool = ipaddress.IPv4Network(spec.segments_subnet)  # the segments are IPv4 /24s
    count = spec.slots * spec.segments_per_slot
    subnets = list(pool.subnets(new_prefix=24))
    if len(subnets) < count:
        raise ValueError(f"PLATTER_LAB_SEGMENTS_SUBNET {pool} holds fewer than {count} /24s")
    return [Segment(i, subnet, spec.link_prefix) for i, subnet in enumerate(subnets[:count])]


def slot_segments(spec: LabSpec | None = None) -> list[Segment]:
    """The segments this portal (its LAB_ADDRESS_SLOT) hands out."""
    spec = spec or current()
    first = settings.LAB_ADDRESS_SLOT * spec.segments_per_slot
    return all_segments(spec)[first : first + spec.segments_per_slot]


def link_pattern(spec: LabSpec) -> str:
    """Every link the lab makes: its flat bridge, segment bridges and shims, and the link
    holding its registry's address (apps/lab/registry.py)."""
    return rf"{spec.bridge}|{spec.link_prefix}[shr]\d\d"


def ensure_segments(spec: LabSpec, made: Callable[[str], object] = lambda name: None) -> None:
    """Bridges, shims and routes of every segment; made(name) for each link this call made."""
    for segment in all_segments(spec):
        refuse_foreign_route(segment)
        if host.ensure_bridge(segment.bridge):
            made(segment.bridge)
        if not host.link_exists(segment.shim):
            host.run(
                "ip",
                "link",
                "add",
                segment.shim,
                "link",
                segment.bridge,
                "type",
                "macvlan",
                "mode",
                "bridge",
            )
            made(segment.shim)
        host.run("ip", "addr", "replace", f"{segment.shim_address}/32", "dev", segment.shim)
        host.run("ip", "addr", "replace", f"{segment.portal_address}/32", "dev", segment.shim)
        host.run("ip", "link", "set", segment.shim, "up")
        host.run(
            "ip",
            "route",
            "replace",
            str(segment.subnet),
            "dev",
            segment.shim,
            "src",
            segment.shim_address,
        )


def route_owner(subnet: ipaddress.IPv4Network) -> str | None:
    """The link the host routes exactly this subnet through, if any."""
    fields = host.run("ip", "-o", "route", "show", str(subnet), check=False).stdout.split()
    return fields[fields.index("dev") + 1] if "dev" in fields else None


def refuse_foreign_route(segment: Segment) -> None:
    """Another checkout's lab (or anything else) routing the subnet would lose its route to a
    silent `ip route replace`: say so instead, naming that lab when it is one."""
    owner = route_owner(segment.subnet)
    if owner is None or owner == segment.shim:
        return
    lab = lab_of_link(owner)
    holder = f"{owner}, a link of the lab of {lab}" if lab else owner
    advice = (
        "run ./platter lab down there" if lab else "remove that route"
    ) + ", or give this lab a PLATTER_LAB_SEGMENTS_SUBNET of its own"
    raise host.LabError(f"{segment.subnet} is already routed through {holder}: {advice}")


def remove_segments(spec: LabSpec) -> None:
    """Deleting a bridge deletes its shim (a macvlan on it) and the shim's route."""
    for segment in all_segments(spec):
        host.delete_link(segment.shim)
        host.delete_link(segment.bridge)
