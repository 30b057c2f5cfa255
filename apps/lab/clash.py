"""Another lab (a second checkout's, a CI run's) or anything else holding what this lab needs,
found and named before `lab up` starts anything: its node addresses, its ports, its segments'
subnets. Without this, a second lab's dockerd fails to bind and `up` waits for it in vain."""

from . import host, segments
from .homes import home_of, where
from .host import LabError
from .nodes import DOCKER_TLS_PORT, SSH_PORT, LabSpec


def address_range(spec: LabSpec) -> str:
    addresses = spec.addresses
    last = addresses[-1].removeprefix(spec.address_prefix)
    return addresses[0] + (f"-{last}" if len(addresses) > 1 else "")


def foreign_listeners(spec: LabSpec) -> list[tuple[str, int, int]]:
    """(address, port, pid) of sockets listening where this lab's nodes must, not its own."""
    wanted = set(spec.addresses)
    ports = {DOCKER_TLS_PORT, SSH_PORT}
    found = [
        (ip, port, inode)
        for ip, port, inode in host.listeners()
        if ip in wanted or (ip == "0.0.0.0" and port in ports)  # noqa: S104 (reading, not binding)
    ]
    if not found:
        return []
    owners = host.socket_owners({inode for _, _, inode in found})
    own = {p.pid for p in host.processes_of([spec.home, spec.run_dir])}
    return [
        (ip, port, owners.get(inode, 0))
        for ip, port, inode in found
        if owners.get(inode) not in own
    ]


def refuse_foreign_labs(spec: LabSpec) -> None:
    """Raise a LabError naming who holds this lab's addresses or subnets, and what to do."""
    for ip, port, pid in foreign_listeners(spec):
        home = home_of(pid) if pid else None
        if home is not None:
            raise LabError(
                f"the lab addresses {address_range(spec)} are held by the lab of {where(home)} "
                f"(pid {pid}); run ./platter lab down there, or give this lab addresses of "
                "its own with PLATTER_LAB_ADDRESS_PREFIX"
            )
        holder = str(host.process(pid)) if pid else "a process this user cannot see"
        raise LabError(
            f"{ip}:{port}, where a node of this lab listens, is held by {holder}: stop it, or "
            "give this lab addresses of its own with PLATTER_LAB_ADDRESS_PREFIX"
        )
    for segment in segments.all_segments(spec):
        segments.refuse_foreign_route(segment)
