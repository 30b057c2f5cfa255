"""The lab's cluster networks: one Linux bridge per segment stands for a site's VLAN.

Each cluster holds one isolated network (apps/inventory Network.isolated) for its lifetime, and
on every node its containers hang off that segment's bridge through a macvlan: containers of
one cluster reach each other across nodes, and nothing of another cluster (a macvlan switches
only between interfaces of the same parent, and the host routes nothing: ip_forward is 0).
802.1q sub-interfaces, which a site would use, cannot be made on this machine kind.

The host reaches a segment through a macvlan "shim" on its bridge with the segment's last
address and a route for its subnet, so the portal (the web UI proxy) and a browser or ssh on
the host open cluster addresses directly, never through the default gateway.

Segments are made for every portal slot at once (the dev portal and parallel test runs each
hand out their own LAB_SEGMENTS_PER_SLOT of them), so `lab up` runs once for all of them.
"""

import ipaddress
from dataclasses import dataclass

from django.conf import settings

from . import host
from .nodes import checkout_id

SLOTS = 8
FIRST_HOST_INDEX = 9  # .10: the low addresses stay free for a site's own gear


@dataclass(frozen=True)
class Segment:
    index: int
    subnet: ipaddress.IPv4Network

    @property
    def bridge(self) -> str:
        return f"pl{checkout_id()[:6]}s{self.index:02d}"

    @property
    def shim(self) -> str:
        return f"pl{checkout_id()[:6]}h{self.index:02d}"

    @property
    def shim_address(self) -> str:
        return str(self.subnet.broadcast_address - 1)

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
        }


def all_segments() -> list[Segment]:
    pool = ipaddress.ip_network(settings.LAB_SEGMENTS_SUBNET)
    count = SLOTS * settings.LAB_SEGMENTS_PER_SLOT
    subnets = list(pool.subnets(new_prefix=24))
    if len(subnets) < count:
        raise ValueError(f"PLATTER_LAB_SEGMENTS_SUBNET {pool} holds fewer than {count} /24s")
    return [Segment(index, subnet) for index, subnet in enumerate(subnets[:count])]


def slot_segments() -> list[Segment]:
    """The segments this portal (its LAB_ADDRESS_SLOT) hands out."""
    per_slot = settings.LAB_SEGMENTS_PER_SLOT
    first = settings.LAB_ADDRESS_SLOT * per_slot
    return all_segments()[first : first + per_slot]


def ensure_segments() -> None:
    for segment in all_segments():
        _refuse_foreign_route(segment)
        host.ensure_bridge(segment.bridge)
        if not host.link_exists(segment.shim):
            host.run("ip", "link", "add", segment.shim, "link", segment.bridge,
                     "type", "macvlan", "mode", "bridge")  # fmt: skip
        host.run("ip", "addr", "replace", f"{segment.shim_address}/32", "dev", segment.shim)
        host.run("ip", "link", "set", segment.shim, "up")
        host.run("ip", "route", "replace", str(segment.subnet), "dev", segment.shim,
                 "src", segment.shim_address)  # fmt: skip


def _refuse_foreign_route(segment: Segment) -> None:
    """Another checkout's lab (or anything else) routing the subnet would lose its route to a
    silent `ip route replace`: say so instead."""
    route = host.run("ip", "-o", "route", "show", str(segment.subnet), check=False).stdout
    fields = route.split()
    if "dev" in fields and fields[fields.index("dev") + 1] != segment.shim:
        owner = fields[fields.index("dev") + 1]
        raise host.LabError(
            f"{segment.subnet} is already routed through {owner} (another lab on this machine?):"
            " take that lab down, or give this one PLATTER_LAB_SEGMENTS_SUBNET of its own"
        )


def remove_segments() -> None:
    """Deleting a bridge deletes its shim (a macvlan on it) and the shim's route."""
    for segment in all_segments():
        host.delete_link(segment.shim)
        host.delete_link(segment.bridge)
