"""One dockerd per lab node, each with its own data-root (a file system with quotas on a loop
device: apps/lab/dataroot), exec-root and containerd."""

import shutil
import subprocess
import time

from apps import nodes
from apps.nodes import NodeError
from apps.nodes.engine import Address

from . import dataroot, host
from .host import LabError
from .nodes import DOCKER_TLS_PORT, LabNode

STOP_SECONDS = 20  # a daemon gets this long to stop its containers before it is killed


def dockerd_command(node: LabNode) -> list[str]:
    command = [
        shutil.which("dockerd") or "/usr/sbin/dockerd",
        "--host",
        f"unix://{node.socket}",
        "--data-root",
        str(dataroot.paths(node)[1]),
        "--exec-root",
        str(node.exec_root),
        "--pidfile",
        str(node.pidfile),
        "--containerd-namespace",
        f"platter-{node.name}",
        "--containerd-plugins-namespace",
        f"platter-{node.name}-plugins",
        # The lab must not touch the machine's firewall or default bridge; the cluster network
        # is a macvlan the portal creates.
        "--iptables=false",
        "--ip-masq=false",
        "--bridge=none",
        "--log-level=warn",
    ]
    driver = dataroot.storage_driver(node)
    if driver:  # the one that enforces a writable-layer limit on that file system
        command += ["--storage-driver", driver]
    if not node.over_ssh:
        certs = node.spec.home / "pki" / node.name
        command += [
            "--host",
            f"tcp://{node.address}:{DOCKER_TLS_PORT}",
            "--tlsverify",
            "--tlscacert",
            str(certs / "ca.pem"),
            "--tlscert",
            str(certs / "cert.pem"),
            "--tlskey",
            str(certs / "key.pem"),
        ]
    return command


def local_endpoint(node: LabNode, timeout: int = 10) -> Address:
    """The node's dockerd over its local socket: the lab talks to its daemons through the
    node layer, as the portal does (over TLS or SSH) once they are its nodes."""
    return Address(node.name, f"unix://{node.socket}", timeout=timeout)


def local_node(node: LabNode, timeout: int = 10) -> nodes.NodeClient:
    return nodes.client(local_endpoint(node, timeout))


# The daemons this process started, so a wait sees one exit at once (and reaps it).
_started: dict[str, subprocess.Popen] = {}


def start_dockerd(node: LabNode) -> bool:
    """Start the node's daemon unless it runs; True when this call started it."""
    if host.pid_alive(node.pidfile):
        if node.socket.exists():
            return False
        stop_dockerd(node)  # its socket is gone, so nobody can reach it: start it afresh
    node.exec_root.mkdir(parents=True, exist_ok=True)
    node.home.mkdir(parents=True, exist_ok=True)
    made = dataroot.ensure_data_root(node)  # where the writable-layer limit holds
    try:
        _popen(node)
    except OSError:
        for _, undo in reversed(made):
            undo()
        raise
    return True


def _popen(node: LabNode) -> None:
    log = open(node.home / "dockerd.log", "ab")  # noqa: SIM115 (handed to the daemon)
    # A session of its own: Ctrl-C in the terminal that ran `up` must not kill the daemons.
    _started[str(node.pidfile)] = subprocess.Popen(
        dockerd_command(node), stdout=log, stderr=log, start_new_session=True
    )
    log.close()


def exited(node: LabNode) -> bool:
    started = _started.get(str(node.pidfile))
    if started is not None:
        return started.poll() is not None
    return not host.pid_alive(node.pidfile)


def last_log_line(node: LabNode) -> str:
    try:
        lines = (node.home / "dockerd.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1][-300:] if lines else "an empty log"


def wait_for_dockerd(node: LabNode, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if node.socket.exists():
            try:
                local_node(node, timeout=5).ping()
                return
            except NodeError as exc:  # still starting
                last_error = exc
        # A daemon that exited (it could not bind its address, say) never answers: say why now.
        if exited(node):
            raise LabError(
                f"dockerd of {node.name} exited while starting: {last_log_line(node)} "
                f"(see {node.home / 'dockerd.log'})"
            )
        time.sleep(0.2)
    raise LabError(
        f"dockerd of {node.name} did not answer within {seconds:.0f} s ({last_error}); "
        f"see {node.home / 'dockerd.log'}"
    )


def remove_containers(node: LabNode) -> str | None:
    """Remove every container of a daemon that answers; the reason when it does not."""
    if not (host.pid_alive(node.pidfile) and node.socket.exists()):
        return "its daemon is not running"
    try:
        local_node(node).remove_all_containers()
    except Exception as exc:  # noqa: BLE001 (any failure here: the process sweep follows)
        return f"{type(exc).__name__}: {exc}"
    return None


def stop_dockerd(node: LabNode) -> None:
    host.stop_process(node.pidfile, f"dockerd of {node.name}", seconds=STOP_SECONDS)
    started = _started.pop(str(node.pidfile), None)
    if started is not None and started.poll() is None:
        started.wait(timeout=5)
