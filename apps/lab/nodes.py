"""Where the lab's nodes live on this machine: names, addresses, folders and sockets."""

import hashlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from apps.inventory.models import Disk

DOCKER_TLS_PORT = 2376
SSH_PORT = 2222


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
