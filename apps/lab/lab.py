"""The lab: this one machine turned into several Platter nodes.

Each node is a separate dockerd (own data-root, exec-root and containerd namespace) listening on
its own loopback address with mutual TLS, except one reached over SSH. Each node gets loop-device
"physical disks" with a real file system mounted under its disk root. A bridge is the parent of
a macvlan cluster network on every node, so containers on different nodes reach each other on
portal-chosen addresses. `up` is idempotent (it reuses what runs), `down` removes everything.
"""

import hashlib
import ipaddress
import os
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import docker
from django.conf import settings
from django.db import transaction

from apps.inventory.models import Disk, Network, Node
from workers import drivers

from . import host, pki
from .host import LabError

DOCKER_TLS_PORT = 2376
SSH_PORT = 2222
NETWORK_NAME = "platter"


def checkout_id() -> str:
    """Short id of this checkout, so two checkouts on one machine never share names."""
    return hashlib.sha256(str(settings.STATE_DIR.resolve()).encode()).hexdigest()[:8]


def state_dir() -> Path:
    return settings.STATE_DIR / "lab"


def run_dir() -> Path:
    # Unix socket paths must stay under 108 bytes, so sockets live in a short folder under /run.
    return Path("/run/platter") / checkout_id()


def bridge_name() -> str:
    return f"plab{checkout_id()}"


@dataclass(frozen=True)
class LabNode:
    name: str
    address: str
    over_ssh: bool = False

    @property
    def home(self) -> Path:
        return state_dir() / "nodes" / self.name

    @property
    def disk_root(self) -> Path:
        return self.home / "disks"

    @property
    def socket(self) -> Path:
        return run_dir() / self.name / "docker.sock"

    @property
    def pidfile(self) -> Path:
        return run_dir() / self.name / "dockerd.pid"

    @property
    def tls_dir(self) -> Path:
        """The portal's client certificate for this node (with the CA that signed the node)."""
        return state_dir() / "pki" / "client"

    @property
    def endpoint(self) -> str:
        if self.over_ssh:
            return f"ssh://root@{self.address}:{SSH_PORT}"
        return f"tcp://{self.address}:{DOCKER_TLS_PORT}"

    def disk_paths(self, index: int) -> tuple[Path, Path]:
        """(backing image file, mount point) of disk number index (1-based)."""
        return self.home / "images" / f"disk{index}.img", self.disk_root / f"disk{index}"


def lab_nodes() -> list[LabNode]:
    prefix = settings.LAB_ADDRESS_PREFIX
    nodes = [LabNode(f"lab-{i}", f"{prefix}{i}") for i in range(1, settings.LAB_NODES + 1)]
    if settings.LAB_SSH_NODE:
        nodes.append(LabNode("lab-ssh", f"{prefix}{settings.LAB_NODES + 1}", over_ssh=True))
    return nodes


def disk_kind(index: int) -> str:
    """The last LAB_SSD_PER_NODE disks of each node are called SSDs, the rest HDDs."""
    first_ssd = settings.LAB_DISKS_PER_NODE - settings.LAB_SSD_PER_NODE + 1
    return Disk.Kind.SSD if index >= first_ssd else Disk.Kind.HDD


# ---------------------------------------------------------------- certificates and SSH keys


def ensure_pki(nodes: list[LabNode]) -> None:
    pki_dir = state_dir() / "pki"
    ca_dir = pki_dir / "ca"
    pki.ensure_ca(ca_dir)
    if not (pki_dir / "client" / "cert.pem").exists():
        pki.issue(ca_dir, pki_dir / "client", "platter-portal", client=True)
    for node in nodes:
        if not node.over_ssh and not (pki_dir / node.name / "cert.pem").exists():
            pki.issue(ca_dir, pki_dir / node.name, node.name, server_ips=[node.address])


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


# ---------------------------------------------------------------- disks


def ensure_disks(node: LabNode) -> list[tuple[int, str, Path]]:
    """Attach, format and mount the node's disks; return (index, device, mount point) each."""
    disks = []
    for index in range(1, settings.LAB_DISKS_PER_NODE + 1):
        image, mount_point = node.disk_paths(index)
        device = host.ensure_loop_device(image, settings.LAB_DISK_SIZE_MB)
        host.ensure_filesystem(device, settings.LAB_DISK_FS, f"{node.name}-d{index}")
        host.ensure_mounted(device, mount_point)
        disks.append((index, device, mount_point))
    return disks


def remove_disks(node: LabNode) -> None:
    for index in range(1, settings.LAB_DISKS_PER_NODE + 1):
        image, mount_point = node.disk_paths(index)
        host.unmount(mount_point)
        host.detach_loop_devices(image)


# ---------------------------------------------------------------- docker daemons


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


# ---------------------------------------------------------------- base image and network


def build_base_image_tar() -> Path:
    """A busybox-static root file system as a tar, imported into each node with no registry."""
    tar_path = state_dir() / "lab-base.tar"
    if tar_path.exists():
        return tar_path
    busybox = shutil.which("busybox") or "/bin/busybox"
    applets = host.run(busybox, "--list-full").stdout.split()
    tmp = tar_path.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_file(name: str, data: bytes) -> None:
            import io

            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        for folder in (
            "bin",
            "sbin",
            "usr",
            "usr/bin",
            "usr/sbin",
            "etc",
            "data",
            "root",
            "var",
            "proc",
            "sys",
            "dev",
        ):
            add_dir(folder)
        add_dir("tmp", 0o1777)
        tar.add(busybox, arcname="bin/busybox")
        for applet in applets:
            if applet != "bin/busybox":
                link = tarfile.TarInfo(applet)
                link.type, link.linkname = tarfile.SYMTYPE, "/bin/busybox"
                tar.addfile(link)
        add_file(
            "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"
        )
        add_file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    tmp.rename(tar_path)
    return tar_path


def ensure_image(node: LabNode, tar_path: Path) -> None:
    client = local_client(node, timeout=120)
    try:
        client.images.get(settings.LAB_IMAGE)
        return
    except docker.errors.ImageNotFound:
        pass
    repository, tag = settings.LAB_IMAGE.rsplit(":", 1)
    client.api.import_image(
        src=str(tar_path), repository=repository, tag=tag, changes=['CMD ["/bin/sh"]']
    )


def lab_network_spec() -> dict:
    subnet = ipaddress.ip_network(settings.LAB_SUBNET)
    hosts = list(subnet.hosts())
    return {
        "name": "lab",
        "subnet": str(subnet),
        "gateway": str(hosts[0]),
        "first_address": str(hosts[9]),
        "last_address": str(hosts[-6]),
    }


def ensure_cluster_network(node: LabNode) -> None:
    spec = lab_network_spec()
    drivers.ensure_macvlan_network(
        local_client(node), NETWORK_NAME, spec["subnet"], spec["gateway"], bridge_name()
    )


# ---------------------------------------------------------------- inventory


def host_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise LabError("cannot read MemTotal from /proc/meminfo")


@transaction.atomic
def register(node: LabNode, disks: list[tuple[int, str, Path]]) -> Node:
    """Real inventory records for a lab node: its endpoint, TLS folder and mounted disks."""
    # Each lab node may use the whole machine's cores (Docker refuses --cpus above the host's);
    # memory is split so that the lab never promises more than the machine has.
    record, _ = Node.objects.update_or_create(
        name=node.name,
        defaults={
            "endpoint": node.endpoint,
            "tls_dir": "" if node.over_ssh else str(node.tls_dir),
            "cores": os.cpu_count() or 1,
            "memory_mb": host_memory_mb() // (len(lab_nodes()) + 1),
            "state": Node.State.ACTIVE,
            "labels": {"lab": True, "transport": "ssh" if node.over_ssh else "tls"},
            "disk_root": str(node.disk_root),
            "network_parent": bridge_name(),
        },
    )
    for index, device, mount_point in disks:
        cap = settings.LAB_DISK_BPS_MB * 1024 * 1024 if disk_kind(index) == Disk.Kind.HDD else 0
        Disk.objects.update_or_create(
            node=record,
            mount_path=str(mount_point),
            defaults={
                "device": device,
                "kind": disk_kind(index),
                "capacity_bytes": shutil.disk_usage(mount_point).total,
                "write_bps": cap,
                "read_bps": cap,
            },
        )
    spec = lab_network_spec()
    Network.objects.update_or_create(name=spec.pop("name"), defaults=spec)
    return record


def sync_inventory() -> list[Node]:
    """Register the running lab's nodes and mounted disks (e.g. in a fresh test database)."""
    records = []
    for node in lab_nodes():
        disks = []
        for index in range(1, settings.LAB_DISKS_PER_NODE + 1):
            mount_point = node.disk_paths(index)[1]
            device = host.mounted_device(mount_point)
            if device is None:
                raise LabError(f"{node.name}: disk {index} is not mounted; run ./platter lab up")
            disks.append((index, device, mount_point))
        records.append(register(node, disks))
    return records


def unregister(names: list[str]) -> None:
    Disk.objects.filter(node__name__in=names).delete()
    Node.objects.filter(name__in=names).delete()
    Network.objects.filter(name="lab").delete()


# ---------------------------------------------------------------- up / down / status


def require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab starts daemons, loop devices and mounts: run it as root")


def up(log=print) -> list[Node]:
    require_root()
    nodes = lab_nodes()
    state_dir().mkdir(parents=True, exist_ok=True)
    run_dir().mkdir(parents=True, exist_ok=True)
    ensure_pki(nodes)
    host.ensure_bridge(bridge_name())
    for node in nodes:
        start_dockerd(node)
    tar_path = build_base_image_tar()
    registered = []
    for node in nodes:
        disks = ensure_disks(node)
        wait_for_dockerd(node)
        ensure_image(node, tar_path)
        ensure_cluster_network(node)
        if node.over_ssh:
            ensure_ssh_keys()
            start_sshd(node)
            install_ssh_client_config(node)
        registered.append(register(node, disks))
        log(f"{node.name}: {node.endpoint}, {len(disks)} disks under {node.disk_root}")
    return registered


def down(log=print) -> None:
    require_root()
    nodes = lab_nodes()
    host.stop_process(run_dir() / "sshd.pid", "lab sshd")
    remove_ssh_client_config()
    for node in nodes:
        stop_dockerd(node)
        host.unmount_below(node.home / "docker")
        host.unmount_below(run_dir() / node.name)
        remove_disks(node)
        log(f"{node.name}: stopped")
    host.delete_link(bridge_name())
    unregister([node.name for node in nodes])
    shutil.rmtree(state_dir(), ignore_errors=True)
    shutil.rmtree(run_dir(), ignore_errors=True)


def status() -> list[dict]:
    rows = []
    for node in lab_nodes():
        row = {"node": node.name, "endpoint": node.endpoint, "dockerd": "down", "disks": 0}
        if host.pid_alive(node.pidfile):
            try:
                local_client(node, timeout=5).ping()
                row["dockerd"] = "up"
            except (docker.errors.DockerException, OSError) as exc:
                row["dockerd"] = f"not answering ({exc})"
        row["disks"] = sum(
            host.mounted_device(node.disk_paths(i)[1]) is not None
            for i in range(1, settings.LAB_DISKS_PER_NODE + 1)
        )
        rows.append(row)
    return rows


def is_up() -> bool:
    return all(row["dockerd"] == "up" for row in status())
