"""Thin wrappers over the host tools the lab needs (ip, losetup, mkfs, mount, processes)."""

import os
import signal
import subprocess
import time
from pathlib import Path


class LabError(RuntimeError):
    """The lab could not do a step; the message says which and why."""


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise LabError(f"{' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result


def link_exists(name: str) -> bool:
    return run("ip", "link", "show", name, check=False).returncode == 0


def ensure_bridge(name: str) -> None:
    if not link_exists(name):
        run("ip", "link", "add", name, "type", "bridge")
    run("ip", "link", "set", name, "up")


def delete_link(name: str) -> None:
    if link_exists(name):
        run("ip", "link", "delete", name)


def ensure_loop_device(image: Path, size_mb: int) -> str:
    """A loop device backed by a sparse file; reuses the device already attached to it."""
    if not image.exists():
        image.parent.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as f:
            f.truncate(size_mb * 1024 * 1024)
    attached = run("losetup", "-j", str(image)).stdout.strip()
    if attached:
        return attached.split(":", 1)[0]
    return run("losetup", "-f", "--show", str(image)).stdout.strip()


def detach_loop_devices(image: Path) -> None:
    attached = run("losetup", "-j", str(image), check=False).stdout.strip()
    for line in attached.splitlines():
        run("losetup", "-d", line.split(":", 1)[0], check=False)


def ensure_filesystem(device: str, fs: str, label: str) -> None:
    probe = run("blkid", "-o", "value", "-s", "TYPE", device, check=False).stdout.strip()
    if probe == fs:
        return
    if fs == "xfs":
        run("mkfs.xfs", "-q", "-f", "-L", label[:12], device)
    else:
        run("mkfs.ext4", "-q", "-F", "-L", label[:16], "-E", "lazy_itable_init=1,nodiscard", device)


def mounted_device(path: Path) -> str | None:
    """The device mounted at path, read from the kernel's mount table."""
    target = str(path.resolve())
    for line in Path("/proc/self/mounts").read_text().splitlines():
        source, mount_point, *_ = line.split()
        if mount_point == target:
            return source
    return None


def ensure_mounted(device: str, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    current = mounted_device(path)
    if current == device:
        return
    if current is not None:
        raise LabError(f"{path} already has {current} mounted, expected {device}")
    run("mount", device, str(path))


def unmount(path: Path) -> None:
    if mounted_device(path) is not None:
        run("umount", "-l", str(path), check=False)


def pid_alive(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def stop_process(pidfile: Path, what: str, seconds: float = 20) -> None:
    pid = pid_alive(pidfile)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pid_alive(pidfile) is None:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    if pid_alive(pidfile) is not None:
        raise LabError(f"{what} (pid {pid}) did not stop")


def unmount_below(root: Path) -> None:
    """Unmount everything under root (a killed dockerd leaves overlay and netns mounts)."""
    prefix = str(root.resolve()) + "/"
    points = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]
    for point in sorted(points, key=len, reverse=True):
        run("umount", "-l", point, check=False)
