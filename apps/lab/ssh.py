"""The lab node reached over SSH: keys, a private sshd, and the client config docker's ssh
transport needs."""

import shutil
import time
from pathlib import Path

from . import host
from .host import LabError
from .nodes import SSH_PORT, LabNode, checkout_id, run_dir, state_dir


def ssh_dir() -> Path:
    return state_dir() / "ssh"


def ensure_ssh_keys() -> None:
    folder = ssh_dir()
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


def install_ssh_client_config(node: LabNode) -> None:
    """docker's ssh transport runs the system ssh client, which reads ~/.ssh/config: point it at
    the lab's key and known hosts through one Include line that `down` removes again."""
    folder = ssh_dir()
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
        f"  ControlPath {run_dir()}/ssh-%C\n"
        f"  ControlPersist 300\n"
    )
    config = user_ssh_config()
    config.parent.mkdir(mode=0o700, exist_ok=True)
    line = f"Include {folder / 'ssh_config'} {SSH_INCLUDE_MARK} {checkout_id()}\n"
    current = config.read_text() if config.exists() else ""
    if line not in current:
        # Include must come before any Host block to apply to every host.
        config.write_text(line + current)
        config.chmod(0o600)


def remove_ssh_client_config() -> None:
    config = user_ssh_config()
    if config.exists():
        mark = f"{SSH_INCLUDE_MARK} {checkout_id()}"
        kept = [line for line in config.read_text().splitlines(keepends=True) if mark not in line]
        config.write_text("".join(kept))


def start_sshd(node: LabNode) -> None:
    folder = ssh_dir()
    pidfile = run_dir() / "sshd.pid"
    if host.pid_alive(pidfile):
        return
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
    host.run(sshd, "-f", str(config), "-E", str(state_dir() / "sshd.log"))
    deadline = time.monotonic() + 10
    while not host.pid_alive(pidfile):
        if time.monotonic() > deadline:
            raise LabError(f"sshd for {node.name} did not start; see {state_dir() / 'sshd.log'}")
        time.sleep(0.05)
