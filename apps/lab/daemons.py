"""One dockerd per lab node, each with its own data-root, exec-root and containerd namespace."""

import shutil
import subprocess
import time

import docker

from workers import drivers

from . import host
from .host import LabError
from .nodes import DOCKER_TLS_PORT, LabNode, run_dir, state_dir


def dockerd_command(node: LabNode) -> list[str]:
    exec_root = run_dir() / node.name
    command = [
        shutil.which("dockerd") or "/usr/sbin/dockerd",
        "--host",
        f"unix://{node.socket}",
        "--data-root",
        str(node.home / "docker"),
        "--exec-root",
        str(exec_root),
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
    if not node.over_ssh:
        certs = state_dir() / "pki" / node.name
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


def local_client(node: LabNode, timeout: int = 10) -> docker.DockerClient:
    """The lab itself talks to its daemons over their unix sockets."""
    return drivers.connect(f"unix://{node.socket}", timeout=timeout)


def start_dockerd(node: LabNode) -> None:
    if host.pid_alive(node.pidfile) and node.socket.exists():
        return
    (run_dir() / node.name).mkdir(parents=True, exist_ok=True)
    node.home.mkdir(parents=True, exist_ok=True)
    log = open(node.home / "dockerd.log", "ab")  # noqa: SIM115 (handed to the daemon)
    # A session of its own: Ctrl-C in the terminal that ran `up` must not kill the daemons.
    subprocess.Popen(dockerd_command(node), stdout=log, stderr=log, start_new_session=True)
    log.close()


def wait_for_dockerd(node: LabNode, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if node.socket.exists():
            try:
                local_client(node, timeout=5).ping()
                return
            except (docker.errors.DockerException, OSError) as exc:  # still starting
                last_error = exc
        time.sleep(0.2)
    raise LabError(
        f"dockerd of {node.name} did not answer within {seconds:.0f} s ({last_error}); "
        f"see {node.home / 'dockerd.log'}"
    )


def stop_dockerd(node: LabNode) -> None:
    try:
        client = local_client(node, timeout=5)
        for container in client.containers.list(all=True):
            container.remove(force=True)
    except docker.errors.DockerException as exc:
        # A daemon that is already dead has no containers left to remove.
        print(f"{node.name}: containers not removed before stop ({exc})")
    host.stop_process(node.pidfile, f"dockerd of {node.name}")
