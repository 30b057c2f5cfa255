"""Another lab (a second checkout's, a CI run's) or anything else holding what this lab needs,
found and named before `lab up` starts anything: its node addresses, its ports, its segments'
subnets. Without this, a second lab's dockerd fails to bind and `up` waits for it in vain."""

import re
from itertools import pairwise
from pathlib import Path

from . import host, segments
from .host import LabError
from .nodes import DOCKER_TLS_PORT, RUN_ROOT, SSH_PORT, LabSpec

HOME_FILE = "home"  # in a lab's run folder: the lab's home, so others can name it


def mark_home(spec: LabSpec) -> None:
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    (spec.run_dir / HOME_FILE).write_text(f"{spec.home}\n")


def where(home: Path) -> str:
    """A checkout's lab lives in <checkout>/.local/lab: name the checkout, else the folder."""
    return str(home.parent.parent if home.parent.name == ".local" else home)


def home_of(pid: int) -> Path | None:
    """The home of the lab a process belongs to, read from its command line."""
    found = host.process(pid)
    words = found.command.split() if found else []
    for flag, value in pairwise(words):
        if flag == "--data-root" and "/nodes/" in value:  # <home>/nodes/<node>/docker
            return Path(value.rsplit("/nodes/", 1)[0])
        if flag == "-f" and value.endswith("/ssh/sshd_config"):  # the lab's sshd
            return Path(value).parent.parent
    for word in words:  # containerd, shims, ssh masters: a path in the lab's run folder
        if word.startswith(f"{RUN_ROOT}/"):
            return home_of_run_dir(RUN_ROOT / Path(word).relative_to(RUN_ROOT).parts[0])
    return None


def home_of_run_dir(run_dir: Path) -> Path | None:
    try:
        return Path((run_dir / HOME_FILE).read_text().strip())
    except OSError:  # a lab from before the file existed: ask its daemons
        pass
    for process in host.processes_of([run_dir]):
        words = process.command.split()
        if "--data-root" in words:
            return home_of(process.pid)
    return None


def lab_of_link(name: str) -> str | None:
    """Where the lab that made this link lives (its names carry the lab's key)."""
    if re.fullmatch(r"plab[0-9a-f]{8}", name):
        keys = [name.removeprefix("plab")]
    elif re.fullmatch(r"pl[0-9a-f]{6}[sh]\d\d", name):  # a segment's bridge or shim
        keys = [d.name for d in RUN_ROOT.glob(f"{name[2:8]}*")] or [name[2:8]]
    else:
        return None
    for key in keys:
        home = home_of_run_dir(RUN_ROOT / key)
        if home is not None:
            return where(home)
    return "another lab on this machine (it left no run folder)"


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
