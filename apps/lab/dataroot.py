"""Each lab node's Docker data-root: a file system of its own on a loop device, one on which
Docker enforces a container's writable-layer size limit (`--storage-opt size=`,
settings.CONTAINER_ROOTFS_LIMIT) as on a real node. On the host's ext4 Docker refuses such a
container outright.

Preferred is XFS mounted with project quotas (pquota) under overlay2, as on production nodes.
A kernel built without XFS quotas (CONFIG_XFS_QUOTA unset; the mount then fails) gets btrfs
under Docker's btrfs driver instead, whose quota groups enforce the limit too, counting the
image's own files as well as what the container writes (a quota group limits the bytes a
subvolume refers to; overlay2 counts only the writes). Which one a node got is read back
from the mount table (`lab status` shows it), and `lab up` probes each daemon with a limited
container and says so when a limit cannot hold there.

The image is a sparse file under the node's home: it costs only what the daemon writes. It is
mounted before the daemon starts; stopping the node (teardown.stop_node) and `lab down` unmount
it and detach its loop device.
"""

import shutil
from collections.abc import Callable
from pathlib import Path

from apps.nodes import NodeClient, NodeError

from . import host
from .host import LabError
from .nodes import LabNode

XFS_OPTIONS = "pquota"
QUOTA_OPTIONS = {"pquota", "prjquota"}  # the kernel lists pquota as prjquota
DRIVERS = {"xfs": "overlay2", "btrfs": "btrfs"}  # Docker's storage driver on each
PROBE_SIZE = "16m"

Undo = list[tuple[str, Callable[[], object]]]


def paths(node: LabNode) -> tuple[Path, Path]:
    """(backing image file, mount point = the daemon's --data-root)."""
    return node.home / "images" / "docker.img", node.home / "docker"


def storage_driver(node: LabNode) -> str | None:
    """The storage driver for the mounted data-root's file system (None: not mounted)."""
    return DRIVERS.get(host.filesystem_type(paths(node)[1]))


def ensure_data_root(node: LabNode) -> Undo:
    """Attach, format (once) and mount the node's data-root. Returns the undo steps (what,
    action) of what this call made, latest last."""
    image, mount_point = paths(node)
    if host.mounted_device(mount_point) is not None:
        fs = host.filesystem_type(mount_point)
        if fs not in DRIVERS or (
            fs == "xfs" and not host.mount_options(mount_point) & QUOTA_OPTIONS
        ):
            raise LabError(
                f"{node.name}: {mount_point} is {fs} without quotas; run ./platter lab down, "
                "then up"
            )
        return []
    if mount_point.exists() and any(mount_point.iterdir()):
        # A data-root of an older lab, on the host's file system: its images load again.
        if host.mounts_below(mount_point):
            raise LabError(f"{node.name}: {mount_point} still has mounts below it; lab down first")
        shutil.rmtree(mount_point)
    device, attached = host.ensure_loop_device(image, node.spec.data_root_mb)
    made: Undo = []
    if attached:
        made.append((f"detach {device}", lambda: host.detach_loop_device(device)))
    try:
        _mount(node, device, mount_point)
    except BaseException:
        for _, undo in reversed(made):  # nothing half-made stays attached
            undo()
        raise
    made.append((f"unmount {mount_point}", lambda: host.unmount(mount_point)))
    return made


def _mount(node: LabNode, device: str, mount_point: Path) -> None:
    """XFS with pquota when the kernel has XFS quotas, else btrfs (kept once chosen)."""
    label = f"{node.name}-docker"
    if host.filesystem_type_of(device) != "btrfs":
        host.ensure_filesystem(device, "xfs", label)
        try:
            host.ensure_mounted(device, mount_point, options=XFS_OPTIONS)
            return
        except LabError:  # "quota support not available in this kernel"
            pass
    host.ensure_filesystem(device, "btrfs", label)
    host.ensure_mounted(device, mount_point)


def release_data_root(node: LabNode) -> None:
    """Unmount the data-root and detach its loop device (the daemon is stopped)."""
    image, mount_point = paths(node)
    host.unmount_below(mount_point)
    host.detach_loop_devices(image)


def describe(node: LabNode) -> str:
    """What the node's data-root is, from the kernel's mount table (for `lab status`)."""
    mount_point = paths(node)[1]
    fs = host.filesystem_type(mount_point)
    if fs == "xfs" and host.mount_options(mount_point) & QUOTA_OPTIONS:
        return "xfs with project quotas"
    if fs == "btrfs":
        return "btrfs with quota groups"
    if fs:
        return f"{fs} without quotas"
    if mount_point.exists() and any(mount_point.iterdir()):
        return "on the host's file system, without quotas (an older lab: lab down, then up)"
    return "not mounted"


def writable_layer_limit(client: NodeClient) -> str | None:
    """None when the node's Docker enforces a writable-layer size limit; else why not, in
    Docker's words. Probed by running a helper container with a limit: the only sure test,
    since `docker info` names the backing file system but not its mount options."""
    try:
        client.run_helper(["true"], [], host_options={"storage_opt": {"size": PROBE_SIZE}})
    except NodeError as exc:
        return str(exc)
    return None
