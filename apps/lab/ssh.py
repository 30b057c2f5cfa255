"""The lab node reached over SSH: keys, a private sshd, and the client config docker's ssh
transport needs."""

import shutil
import time
from pathlib import Path

from . import host
from .host import LabError
from .nodes import SSH_PORT, LabNode, LabSpec


def ssh_dir(spec: LabSpec) -> Path:
    return spec.home / "ssh"


def sshd_pidfile(spec: LabSpec) -> Path:
    return spec.run_dir / "sshd.pid"


def ensure_ssh_keys(spec: LabSpec) -> None:
    folder = ssh_dir(spec)
    folder.mkdir(parents=True, exist_ok=True)
    for key in ("host_ed25519", "client_ed25519"):
        if not (folder / key).exists():
            host.run(
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                f"platter-{key}",
                "-f",
                str(folder / key),
            )


SSH_INCLUDE_MARK = "# platter lab"


def user_ssh_config() -> Path:
    return Path.home() / ".ssh" / "config"


def include_line(spec: LabSpec) -> str:
    return f"Include {ssh_dir(spec) / 'ssh_config'} {SSH_INCLUDE_MARK} {spec.key}\n"


def install_ssh_client_config(node: LabNode) -> bool:
    """docker's ssh transport runs the system ssh client, which reads ~/.ssh/config: point it at
    the lab's key and known hosts through one Include line that `down` removes again. True
    when this call added the line."""
    folder = ssh_dir(node.spec)
    host_key = (folder / "host_ed25519.pub").read_text().split()
    (folder / "known_hosts").write_text(
        f"[{node.address}]:{SSH_PORT} {host_key[0]} {host_key[1]}\n"
    )
    (folder / "ssh_config").write_text(
        f"Host {node.address}\n"
        f"  User root\n"
        f"  IdentityFile {folder / 'client_ed25519'}\n"
        f"  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {folder / 'known_hosts'}\n"
        f"  StrictHostKeyChecking yes\n"
        f"  BatchMode yes\n"
        f"  ConnectTimeout 10\n"
        # One master connection per node makes every later dial cheap.
        f"  ControlMaster auto\n"
        f"  ControlPath {node.spec.run_dir}/ssh-%C\n"
        f"  ControlPersist 300\n"
    )
    config = user_ssh_config()
    config.parent.mkdir(mode=0o700, exist_ok=True)
    line = include_line(node.spec)
    current = config.read_text() if config.exists() else ""
    if line in current:
        return False
    # Include must come before any Host block to apply to every host.
    config.write_text(line + current)
    config.chmod(0o600)
    return True


def remove_ssh_client_config(spec: LabSpec) -> None:
    config = user_ssh_config()
    if config.exists():
        mark = f"{SSH_INCLUDE_MARK} {spec.key}"
        kept = [line for line in config.read_text().splitlines(keepends=True) if mark not in line]
        config.write_text("".join(kept))


def start_sshd(node: LabNode) -> bool:
    """Start the lab's sshd unless it runs; True when this call started it."""
    spec = node.spec
    folder = ssh_dir(spec)
    pidfile = sshd_pidfile(spec)
    if host.pid_alive(pidfile):
        return False
    shutil.copy(folder / "client_ed25519.pub", folder / "authorized_keys")
    config = folder / "sshd_config"
    config.write_text(
        f"ListenAddress {node.address}\n"
        f"Port {SSH_PORT}\n"
        f"HostKey {folder / 'host_ed25519'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\n"
        f"PidFile {pidfile}\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "StrictModes no\n"
        "AllowUsers root\n"
        # The node's docker CLI (run by `docker system dial-stdio`) talks to this node's dockerd.
        f"SetEnv DOCKER_HOST=unix://{node.socket}\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    log = spec.home / "sshd.log"
    host.run(sshd, "-f", str(config), "-E", str(log))
    deadline = time.monotonic() + 10
    while not host.pid_alive(pidfile):
        if time.monotonic() > deadline:
            raise LabError(f"sshd for {node.name} did not start; see {log}")
        time.sleep(0.05)
    return True


def stop_sshd(spec: LabSpec) -> None:
    host.stop_process(sshd_pidfile(spec), "lab sshd")
