"""Taking a lab apart whatever state it is in, and taking back what a failed `lab up` made.

Nothing here trusts the lab's own records alone: a killed dockerd leaves its containerd, shims
and containers running and its mounts mounted, a deleted socket makes a daemon unreachable, a
changed PLATTER_LAB_NODES hides nodes. So after asking the daemons nicely, the clean-up reads
the machine itself (processes, the mount table, loop devices, links) for what belongs to the
lab's folders and names, and removes that.
"""

import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from apps.clusters.perimeter import tables_of_nodes

from . import daemons, dataroot, host, registry, segments, ssh
from .host import LabError
from .nodes import LabNode, LabSpec, lab_nodes

Log = Callable[[str], None]


class Undo:
    """What a `lab up` made, taken back in reverse order when it fails."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Callable[[], object]]] = []

    def add(self, what: str, action: Callable[[], object]) -> None:
        self.steps.append((what, action))

    def __len__(self) -> int:
        return len(self.steps)

    def run(self) -> list[str]:
        """Every step, even after one failed; returns what could not be undone, and why."""
        problems = []
        while self.steps:
            what, action = self.steps.pop()
            try:
                action()
            except Exception as exc:  # noqa: BLE001 (the rest must still be undone)
                problems.append(f"{what}: {exc}")
        return problems


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Ctrl-C (or a supervisor's SIGTERM) waits until the clean-up is done: a clean-up cut in
    half is what leaves daemons and mounts behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_node(node: LabNode) -> None:
    """One node's daemon with its containerd, shims and containers, and their mounts."""
    daemons.remove_containers(node)
    try:
        daemons.stop_dockerd(node)
    finally:
        survivors = host.kill_processes(host.processes_of([node.home, node.exec_root]))
        host.unmount_below(node.exec_root)
        dataroot.release_data_root(node)  # its overlay mounts, itself, its loop device
    if survivors:
        raise LabError(f"{node.name}: still running: {', '.join(map(str, survivors))}")


def leftovers(spec: LabSpec) -> list[str]:
    """What of the lab the machine still holds, read from the kernel's tables."""
    roots = [spec.home, spec.run_dir]
    found = [f"process {p}" for p in host.processes_of(roots)]
    found += [f"mount {point}" for root in roots for point in host.mounts_below(root)]
    found += [
        f"loop device {device} on {path}"
        for device, path in host.loop_devices_below(spec.home).items()
    ]
    found += [f"link {name}" for name in host.links_matching(segments.link_pattern(spec))]
    return found


def teardown(spec: LabSpec, log: Log = print) -> list[str]:
    """Remove everything of the lab; returns what is still there afterwards (normally nothing)."""
    problems = []
    nodes = lab_nodes(spec)
    for node in nodes:
        reason = daemons.remove_containers(node)
        if reason:
            log(f"{node.name}: containers not removed through dockerd ({reason}); stopping them")
    for node in nodes:
        try:
            daemons.stop_dockerd(node)
        except LabError as exc:  # the sweep below kills it
            log(str(exc))
    try:
        ssh.stop_sshd(spec)
    except LabError as exc:
        log(str(exc))
    try:
        registry.stop(spec)  # its storage, a cache of images, stays
    except LabError as exc:  # the sweep below kills it
        log(str(exc))
    # Whatever of the lab still runs: daemons of nodes no longer configured, a daemon whose
    # pidfile is gone, containerd and its shims after a killed dockerd, containers, ssh masters.
    swept = host.processes_of([spec.home, spec.run_dir])
    if swept:
        log(f"stopping {len(swept)} leftover processes: " + ", ".join(map(str, swept[:5])))
    host.kill_processes(swept)
    for root in (spec.run_dir, spec.home):
        host.unmount_below(root)
    for device in host.loop_devices_below(spec.home):
        host.detach_loop_device(device)
    for name in host.links_matching(segments.link_pattern(spec)):
        try:
            host.delete_link(name)  # a bridge takes its shim along: a link gone is skipped
        except LabError as exc:
            problems.append(str(exc))
    tables = tables_of_nodes(node.name for node in lab_nodes(spec))
    for table in host.nft_tables_matching(tables):
        host.delete_nft_table(table)  # the nodes' firewall rules: tables of Platter's own
    ssh.remove_ssh_client_config(spec)
    remaining = settle(spec)
    if not any(item.startswith("mount ") for item in remaining):
        # Only with nothing mounted below: rmtree must never walk into a mounted disk.
        shutil.rmtree(spec.home, ignore_errors=True)
        shutil.rmtree(spec.run_dir, ignore_errors=True)
    return problems + remaining


def settle(spec: LabSpec, seconds: float = 10) -> list[str]:
    """Leftovers once the kernel let go: a lazily unmounted disk frees its loop device only
    when the last user of the file system is gone."""
    deadline = time.monotonic() + seconds
    while (remaining := leftovers(spec)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return remaining
