"""The lab: this one machine turned into several Platter nodes.

Each node is a separate dockerd (own data-root, exec-root and containerd namespace) listening on
its own loopback address with mutual TLS, except one reached over SSH. Each node gets loop-device
"physical disks" with a real file system mounted under its disk root. Each cluster network
segment is a bridge that is the parent of a macvlan network on every node (apps/lab/segments),
so a cluster's containers on different nodes reach each other on portal-chosen addresses and
nobody else's. `up` is idempotent (it reuses what runs), `down` removes everything.
"""

import os
import shutil
from pathlib import Path

import docker
from django.conf import settings
from django.db import transaction
from django.db.models import ProtectedError

from apps.inventory import pki
from apps.inventory.models import Disk, Network, Node
from apps.inventory.services import set_disk_state, set_node_state
from workers.discovery import KIND_FILE

from . import host, segments, ssh
from .daemons import local_client, start_dockerd, stop_dockerd, wait_for_dockerd
from .host import LabError
from .image import (
    build_base_image_tar,
    build_fio_image_tar,
    ensure_cluster_network,
    ensure_image,
)
from .nodes import LabNode, bridge_name, disk_kind, lab_nodes, run_dir, state_dir
from .products import ensure_product_images, node_images


def ensure_pki(nodes: list[LabNode]) -> None:
    pki_dir = state_dir() / "pki"
    ca_dir = pki_dir / "ca"
    pki.ensure_ca(ca_dir, "Platter lab CA")
    if not (pki_dir / "client" / "cert.pem").exists():
        pki.issue(ca_dir, pki_dir / "client", "platter-portal", client=True)
    for node in nodes:
        if not node.over_ssh and not (pki_dir / node.name / "cert.pem").exists():
            pki.issue(ca_dir, pki_dir / node.name, node.name, server_names=[node.address])


# ---------------------------------------------------------------- disks


def ensure_disks(node: LabNode) -> list[tuple[int, str, Path]]:
    """Attach, format and mount the node's disks; return (index, device, mount point) each."""
    disks = []
    for index in range(1, settings.LAB_DISKS_PER_NODE + 1):
        image, mount_point = node.disk_paths(index)
        device = host.ensure_loop_device(image, settings.LAB_DISK_SIZE_MB)
        host.ensure_filesystem(device, settings.LAB_DISK_FS, f"{node.name}-d{index}")
        host.ensure_mounted(device, mount_point)
        # Loop devices all look rotational: tell disk discovery what this one stands for.
        (mount_point / KIND_FILE).write_text(disk_kind(index) + "\n")
        disks.append((index, device, mount_point))
    return disks


def remove_disks(node: LabNode) -> None:
    for index in range(1, settings.LAB_DISKS_PER_NODE + 1):
        image, mount_point = node.disk_paths(index)
        host.unmount(mount_point)
        host.detach_loop_devices(image)


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
            "images": node_images(node),
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
    register_segments()
    return record


def register_segments() -> None:
    """This portal's cluster networks: its slot's segments, isolated. The shared network of
    earlier labs goes once nothing holds its addresses (a cluster on it keeps it till then)."""
    for segment in segments.slot_segments():
        Network.objects.update_or_create(
            name=segment.network_name, defaults=segment.network_fields()
        )
    Network.objects.filter(name="lab").exclude(addresses__held=True).delete()


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


def unregister(names: list[str]) -> str:
    """Delete the lab's inventory rows; rows that cluster history still points at are kept,
    marked down and retired, so no user's records are lost with the lab."""
    try:
        with transaction.atomic():
            Disk.objects.filter(node__name__in=names).delete()
            Node.objects.filter(name__in=names).delete()
            names = ["lab", *(segment.network_name for segment in segments.all_segments())]
            Network.objects.filter(name__in=names).delete()
        return "inventory rows removed"
    except ProtectedError:
        # Through the inventory services, as an admin's marks: locked and audited (by the
        # system), nodes before disks like a reservation.
        with transaction.atomic():
            for node_id in (
                Node.objects.filter(name__in=names).order_by("id").values_list("id", flat=True)
            ):
                set_node_state(node_id, Node.State.DOWN, reason="the lab was taken down")
            set_disk_state(
                Disk.objects.filter(node__name__in=names).values_list("id", flat=True),
                Disk.State.RETIRED,
            )
        return "clusters still refer to the lab's nodes: their rows are kept, marked down"


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
    segments.ensure_segments()
    for node in nodes:
        start_dockerd(node)
    tar_path = build_base_image_tar()
    fio_tar_path = build_fio_image_tar()
    disks_of = []
    for node in nodes:
        disks = ensure_disks(node)
        disks_of.append(disks)
        wait_for_dockerd(node)
        ensure_image(node, tar_path)
        ensure_image(node, fio_tar_path, settings.LAB_FIO_IMAGE)
        ensure_cluster_network(node)
        if node.over_ssh:
            ssh.ensure_ssh_keys()
            ssh.start_sshd(node)
            ssh.install_ssh_client_config(node)
        log(f"{node.name}: {node.endpoint}, {len(disks)} disks under {node.disk_root}")
    ensure_product_images(nodes, log)
    return [register(node, node_disks) for node, node_disks in zip(nodes, disks_of, strict=True)]


def down(log=print) -> None:
    require_root()
    nodes = lab_nodes()
    host.stop_process(run_dir() / "sshd.pid", "lab sshd")
    ssh.remove_ssh_client_config()
    for node in nodes:
        stop_dockerd(node)
        host.unmount_below(node.home / "docker")
        host.unmount_below(run_dir() / node.name)
        remove_disks(node)
        log(f"{node.name}: stopped")
    host.delete_link(bridge_name())
    segments.remove_segments()
    log(unregister([node.name for node in nodes]))
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
