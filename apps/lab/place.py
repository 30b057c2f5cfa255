"""Where a checkout's lab sits on this machine: its nodes' loopback addresses (127.0.N.x) and
its cluster segments' subnet (10.M.0.0/16).

Two checkouts on one machine (CI's fresh clone beside a developer's running lab, or beside the
links a killed lab left behind) must not claim the same ones. So the first ./platter command of
a checkout picks the first place no other lab holds and keeps it in its state folder; the
settings read it from there, and later commands (`lab down` above all) find the same place.
No Django here: ./platter runs this before any settings load.
"""

import hashlib
import ipaddress
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from apps.lab import host

PLACE_FILE = "lab-place.json"  # in the state folder
PLACES = 24  # 127.0.1-24.x and 10.214-237.0.0/16; the fault suite's scratch labs sit above


@dataclass(frozen=True)
class Place:
    address_prefix: str
    segments_subnet: str

    @classmethod
    def number(cls, index: int) -> "Place":
        return cls(f"127.0.{1 + index}.", f"10.{214 + index}.0.0/16")


DEFAULT = Place.number(0)


def lab_key(state_dir: Path) -> str:
    """The short id of a checkout's lab: in its link names and its /run folder."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:8]


def saved(state_dir: Path) -> Place:
    """The place this checkout's lab took, or the first one for a checkout that took none."""
    try:
        return Place(**json.loads((state_dir / PLACE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return DEFAULT


def ensure(state_dir: Path) -> Place:
    """The checkout's place, chosen now (and kept) if it has none yet."""
    path = state_dir / PLACE_FILE
    if path.exists():
        return saved(state_dir)
    listening = {address for address, _, _ in host.listeners()}
    place = choose(lab_key(state_dir), _routes(), listening)
    state_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(place)) + "\n")
    return place


def choose(own_key: str, routes: list[tuple[str, str]], listening: set[str]) -> Place:
    """The place for the lab keyed `own_key`, given the host's routes (subnet, link) and the
    addresses something listens on. A place another lab's links route, or whose addresses
    something listens on, is taken; one this lab's own links already route (links a lab made
    before places were kept) is this lab's."""
    own_links = f"pl{own_key[:6]}"
    places = [Place.number(index) for index in range(PLACES)]
    for place in places:
        subnet = ipaddress.IPv4Network(place.segments_subnet)
        if any(link.startswith(own_links) and _overlaps(route, subnet) for route, link in routes):
            return place
    for place in places:
        subnet = ipaddress.IPv4Network(place.segments_subnet)
        routed = any(_overlaps(route, subnet) for route, _ in routes)
        heard = any(address.startswith(place.address_prefix) for address in listening)
        if not routed and not heard:
            return place
    raise RuntimeError(
        f"every one of the {PLACES} lab places on this machine is taken by another lab: run "
        "./platter lab down in a checkout you no longer use"
    )


def _overlaps(route: str, subnet: ipaddress.IPv4Network) -> bool:
    try:
        return ipaddress.ip_network(route, strict=False).overlaps(subnet)
    except ValueError:  # "default", or a family of its own
        return False


def _routes() -> list[tuple[str, str]]:
    """(destination, link) of the host's IPv4 routes."""
    routes = []
    for line in host.run("ip", "-o", "-4", "route", "show", check=False).stdout.splitlines():
        fields = line.split()
        if "dev" in fields:
            routes.append((fields[0], fields[fields.index("dev") + 1].split("@")[0]))
    return routes
