"""The lab: this one machine turned into several Platter nodes.

Each node is a separate dockerd (own data-root, exec-root and containerd namespace) listening on
its own loopback address with mutual TLS, except one reached over SSH. Each node gets loop-device
"physical disks" with a real file system mounted under its disk root. Each cluster network
segment is a bridge that is the parent of a macvlan network on every node (apps/lab/segments),
so a cluster's containers on different nodes reach each other on portal-chosen addresses and
nobody else's. `up` is idempotent (it reuses what runs) and takes back what it started when it
fails; `down` removes everything of the lab whatever state it is in (apps/lab/teardown). A
LabSpec (apps/lab/nodes) says which lab: the checkout's own unless told otherwise.
"""

import functools
import os
import shutil
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import ProtectedError

from apps.inventory.discovery import KIND_FILE
from apps.inventory.models import Disk, Network, Node
from apps.inventory.services import set_disk_state, set_node_state
from apps.nodes import NodeError, pki

from . import clash, dataroot, homes, host, registry, segments, ssh
from .daemons import local_node, start_dockerd, wait_for_dockerd
from .host import LabError
from .image import (
    build_base_image_tar,
    build_fio_image_tar,
    build_firewall_image_tar,
    ensure_cluster_network,
    ensure_image,
)
from .nodes import LabNode, LabSpec, current, disk_kind, lab_nodes
from .products import ensure_product_images, node_images
from .teardown import Log, Undo, stop_node, teardown, uninterrupted


def ensure_pki(spec: LabSpec, nodes: list[LabNode]) -> None:
    pki_dir = spec.home / "pki"
    ca_dir = pki_dir / "ca"
    pki.ensure_ca(ca_dir, "Platter lab CA")
    if not (pki_dir / "client" / "cert.pem").exists():
        pki.issue(ca_dir, pki_dir / "client", "platter-portal", client=True)
    for node in nodes:
        if not node.over_ssh and not (pki_dir / node.name / "cert.pem").exists():
            pki.issue(ca_dir, pki_dir / node.name, node.name, server_names=[node.address])


# ---------------------------------------------------------------- disks


def ensure_disks(node: LabNode, undo: Undo) -> list[tuple[int, str, Path]]:
    """Attach, format and mount the node's disks; return (index, device, mount point) each."""
    spec, disks = node.spec, []
    for index in range(1, spec.disks_per_node + 1):
        image, mount_point = node.disk_paths(index)
        device, attached = host.ensure_loop_device(image, spec.disk_size_mb)
        if attached:
            undo.add(f"detach {device}", functools.partial(host.detach_loop_device, device))
        host.ensure_filesystem(device, spec.disk_fs, f"{node.name}-d{index}")
        if host.ensure_mounted(device, mount_point):
            undo.add(f"unmount {mount_point}", functools.partial(host.unmount, mount_point))
        # Loop devices all look rotational: tell disk discovery what this one stands for.
        (mount_point / KIND_FILE).write_text(disk_kind(index, spec) + "\n")
        disks.append((index, device, mount_point))
    return disks


# ---------------------------------------------------------------- inventory


def host_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise LabError("cannot read MemTotal from /proc/meminfo")


@transaction.atomic
def register(node: LabNode, disks: list[tuple[int, str, Path]], layer: str | None = "") -> Node:
    """Real inventory records for a lab node: its endpoint, TLS folder and mounted disks.
    `layer`: whether the node's Docker enforces a writable-layer limit (None: it does; else
    why not; "" keeps what an earlier `lab up` found), kept in the node's labels."""
    spec = node.spec
    labels = {"lab": True, "transport": "ssh" if node.over_ssh else "tls"}
    known = Node.objects.filter(name=node.name).values_list("labels", flat=True).first() or {}
    if layer != "":
        labels[LAYER_LABEL] = "enforced" if layer is None else layer
    elif LAYER_LABEL in known:
        labels[LAYER_LABEL] = known[LAYER_LABEL]
    # Each lab node may use the whole machine's cores (Docker refuses --cpus above the host's);
    # memory is split so that the lab never promises more than the machine has.
    record, _ = Node.objects.update_or_create(
        name=node.name,
        defaults={
            "endpoint": node.endpoint,
            "tls_dir": "" if node.over_ssh else str(node.tls_dir),
            "cores": os.cpu_count() or 1,
            "memory_mb": host_memory_mb() // (len(lab_nodes(spec)) + 1),
            "state": Node.State.ACTIVE,
            "labels": labels,
            "disk_root": str(node.disk_root),
            "network_parent": spec.bridge,
            "images": node_images(node),
        },
    )
    mounted = []
    for index, device, mount_point in disks:
        kind = disk_kind(index, spec)
        cap = spec.disk_bps_mb * 1024 * 1024 if kind == Disk.Kind.HDD else 0
        disk, _ = Disk.objects.update_or_create(
            node=record,
            mount_path=str(mount_point),
            defaults={
                "device": device,
                "kind": kind,
                "capacity_bytes": shutil.disk_usage(mount_point).total,
                "write_bps": cap,
                "read_bps": cap,
            },
        )
        mounted.append(disk.id)
    # A lab taken down while clusters still pointed at it retired its disks (unregister):
    # mounted again, they are back in the pool (a disk someone still holds stays retired).
    retired = Disk.objects.filter(id__in=mounted, state=Disk.State.RETIRED)
    set_disk_state(retired.values_list("id", flat=True), Disk.State.AVAILABLE)
    register_segments(spec)
    return record


# A node label: "enforced" when the node's Docker enforces a container's writable-layer size
# limit (settings.CONTAINER_ROOTFS_LIMIT), else Docker's reason why it cannot.
LAYER_LABEL = "writable_layer_limit"


def register_segments(spec: LabSpec) -> None:
    """This portal's cluster networks: its slot's segments, isolated. The shared network of
    earlier labs goes once nothing holds its addresses (a cluster on it keeps it till then)."""
    for segment in segments.slot_segments(spec):
        Network.objects.update_or_create(
            name=segment.network_name, defaults=segment.network_fields()
        )
    Network.objects.filter(name="lab").exclude(addresses__held=True).delete()


def sync_inventory(spec: LabSpec | None = None) -> list[Node]:
    """Register the running lab's nodes and mounted disks (e.g. in a fresh test database)."""
    records = []
    for node in lab_nodes(spec):
        disks = []
        for index in range(1, node.spec.disks_per_node + 1):
            mount_point = node.disk_paths(index)[1]
            device = host.mounted_device(mount_point)
            if device is None:
                raise LabError(f"{node.name}: disk {index} is not mounted; run ./platter lab up")
            disks.append((index, device, mount_point))
        records.append(register(node, disks))
    return records


def unregister(names: list[str], spec: LabSpec | None = None) -> str:
    """Delete the lab's inventory rows; rows that cluster history still points at are kept,
    marked down and retired, so no user's records are lost with the lab."""
    networks = ["lab", *(segment.network_name for segment in segments.all_segments(spec))]
    try:
        with transaction.atomic():
            Disk.objects.filter(node__name__in=names).delete()
            Node.objects.filter(name__in=names).delete()
            Network.objects.filter(name__in=networks).delete()
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


# ---------------------------------------------------------------- up, down, status


def up(log: Log = print, spec: LabSpec | None = None) -> list[Node]:
    """Bring the lab up (reusing what runs). When a step fails, or Ctrl-C comes, what this call
    started is taken back and a LabError says what failed."""
    require_root()
    spec = spec or current()
    clash.refuse_foreign_labs(spec)  # before anything is started
    undo = Undo()
    try:
        return _up(spec, undo, log)
    except BaseException as exc:
        with uninterrupted():
            log(f"lab up failed; taking back the {len(undo)} things it had started")
            problems = undo.run()
        if isinstance(exc, KeyboardInterrupt):
            raise
        reason = str(exc) if isinstance(exc, LabError) else f"{type(exc).__name__}: {exc}"
        message = f"lab up failed: {reason}. What this run had started is stopped again"
        if problems:
            message += "; except: " + "; ".join(problems)
        raise LabError(message) from exc


def _up(spec: LabSpec, undo: Undo, log: Log) -> list[Node]:
    for folder in (spec.home, spec.run_dir):
        if not folder.exists():
            folder.mkdir(parents=True)
            undo.add(
                f"remove {folder}", functools.partial(shutil.rmtree, folder, ignore_errors=True)
            )
    homes.mark_home(spec)
    nodes = lab_nodes(spec)
    ensure_pki(spec, nodes)
    if host.ensure_bridge(spec.bridge):
        undo.add(f"delete link {spec.bridge}", lambda: host.delete_link(spec.bridge))
    segments.ensure_segments(
        spec, lambda name: undo.add(f"delete link {name}", lambda: host.delete_link(name))
    )
    for node in nodes:
        if start_dockerd(node):
            undo.add(f"stop dockerd of {node.name}", functools.partial(stop_node, node))
    tar_path = build_base_image_tar(spec.home)
    fio_tar_path = build_fio_image_tar(spec.home)
    firewall_tar_path = build_firewall_image_tar(spec.home)
    disks_of = []
    layers: dict[str, str | None] = {}  # per node: None, or why the limit cannot hold there
    for node in nodes:
        disks = ensure_disks(node, undo)
        disks_of.append(disks)
        wait_for_dockerd(node)
        ensure_image(node, tar_path)
        ensure_image(node, fio_tar_path, settings.LAB_FIO_IMAGE)
        ensure_image(node, firewall_tar_path, settings.LAB_FIREWALL_IMAGE)
        ensure_cluster_network(node)
        layers[node.name] = dataroot.writable_layer_limit(local_node(node))
        if layers[node.name] is not None:
            log(
                f"{node.name}: a container's writable-layer limit cannot be enforced here: "
                f"{layers[node.name]}"
            )
        if node.over_ssh:
            ssh.ensure_ssh_keys(spec)
            if ssh.start_sshd(node):
                undo.add("stop the lab's sshd", lambda: ssh.stop_sshd(spec))
            if ssh.install_ssh_client_config(node):
                undo.add(
                    "remove the lab's Include line in ~/.ssh/config",
                    lambda: ssh.remove_ssh_client_config(spec),
                )
        log(
            f"{node.name}: {node.endpoint}, {len(disks)} disks under {node.disk_root}, "
            f"data-root {dataroot.describe(node)}"
        )
    if spec.products:
        if registry.ensure_running(spec)[1]:
            undo.add("stop the lab's registry", functools.partial(registry.stop, spec))
        ensure_product_images(nodes, log)
    with transaction.atomic():  # all nodes or none
        return [
            register(node, disks, layers[node.name])
            for node, disks in zip(nodes, disks_of, strict=True)
        ]


def down(log: Log = print, spec: LabSpec | None = None) -> None:
    """Remove everything of the lab, whatever state it is in (a half-up lab, a dead dockerd, a
    missing socket); a LabError lists what is still there afterwards."""
    require_root()
    spec = spec or current()
    with uninterrupted():
        left = teardown(spec, log)
    for node in lab_nodes(spec):
        log(f"{node.name}: stopped")
    try:
        log(unregister([node.name for node in lab_nodes(spec)], spec))
    except DatabaseError as exc:  # the machine is clean; the rows wait for the next down
        log(f"inventory rows not updated ({exc})")
    if left:
        raise LabError("lab down could not remove: " + "; ".join(left))


def status(spec: LabSpec | None = None) -> list[dict]:
    rows = []
    for node in lab_nodes(spec):
        row = {
            "node": node.name,
            "endpoint": node.endpoint,
            "dockerd": "down",
            "disks": 0,
            "data_root": dataroot.describe(node),
        }
        if host.pid_alive(node.pidfile):
            try:
                local_node(node, timeout=5).ping()
                row["dockerd"] = "up"
            except NodeError as exc:
                row["dockerd"] = f"not answering ({exc})"
        row["disks"] = sum(
            host.mounted_device(node.disk_paths(i)[1]) is not None
            for i in range(1, node.spec.disks_per_node + 1)
        )
        rows.append(row)
    return rows


def is_up(spec: LabSpec | None = None) -> bool:
    return all(row["dockerd"] == "up" for row in status(spec))
