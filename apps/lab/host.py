"""Thin wrappers over the host tools the lab needs (ip, losetup, mkfs, mount, processes), and
readers of the machine's real state (the kernel's tables, not the lab's own records)."""

import os
import re
import signal
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass
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


def ensure_bridge(name: str) -> bool:
    """True when this call made the bridge."""
    made = not link_exists(name)
    if made:
        run("ip", "link", "add", name, "type", "bridge")
    run("ip", "link", "set", name, "up")
    return made


def delete_link(name: str) -> None:
    if link_exists(name):
        run("ip", "link", "delete", name)


def ensure_loop_device(image: Path, size_mb: int) -> tuple[str, bool]:
    """A loop device backed by a sparse file; reuses the device already attached to it.
    Returns (device, True when this call attached it)."""
    if not image.exists():
        image.parent.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as f:
            f.truncate(size_mb * 1024 * 1024)
    attached = run("losetup", "-j", str(image)).stdout.strip()
    if attached:
        return attached.split(":", 1)[0], False
    return run("losetup", "-f", "--show", str(image)).stdout.strip(), True


def detach_loop_devices(image: Path) -> None:
    attached = run("losetup", "-j", str(image), check=False).stdout.strip()
    for line in attached.splitlines():
        run("losetup", "-d", line.split(":", 1)[0], check=False)


def filesystem_type_of(device: str) -> str:
    """The file system on a device, as blkid reads it ("" when none)."""
    return run("blkid", "-o", "value", "-s", "TYPE", device, check=False).stdout.strip()


def ensure_filesystem(device: str, fs: str, label: str) -> None:
    if filesystem_type_of(device) == fs:
        return
    if fs == "xfs":
        run("mkfs.xfs", "-q", "-f", "-L", label[:12], device)
    elif fs == "btrfs":
        run("mkfs.btrfs", "-q", "-f", "-L", label[:255], device)
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


def mount_options(path: Path) -> set[str]:
    """The options path is mounted with, from the kernel's mount table (empty: not mounted)."""
    target = str(path.resolve())
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount_point, _, options, *_ = line.split()
        if mount_point == target:
            return set(options.split(","))
    return set()


def filesystem_type(path: Path) -> str:
    """The type of the file system mounted at path ("" when nothing is)."""
    target = str(path.resolve())
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount_point, fs_type, *_ = line.split()
        if mount_point == target:
            return fs_type
    return ""


def ensure_mounted(device: str, path: Path, options: str = "") -> bool:
    """True when this call mounted it (with `options`, e.g. "pquota", when given)."""
    path.mkdir(parents=True, exist_ok=True)
    current = mounted_device(path)
    if current == device:
        return False
    if current is not None:
        raise LabError(f"{path} already has {current} mounted, expected {device}")
    run("mount", *(["-o", options] if options else []), device, str(path))
    return True


def unmount(path: Path) -> None:
    if mounted_device(path) is not None:
        run("umount", "-l", str(path), check=False)


def pid_alive(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    target = process(pid)
    # A zombie (a daemon this very process started, killed and not yet reaped) is gone too.
    return pid if target is not None and _running(target) else None


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


def mounts_below(root: Path) -> list[str]:
    """Mount points at or under root, deepest first, from the kernel's mount table."""
    top = str(root.resolve())
    points = [
        line.split()[1].replace("\\040", " ")
        for line in Path("/proc/self/mounts").read_text().splitlines()
    ]
    found = [p for p in points if p == top or p.startswith(top + "/")]
    return sorted(set(found), key=len, reverse=True)


def unmount_below(root: Path) -> None:
    """Unmount everything under root (a killed dockerd leaves overlay and netns mounts)."""
    for point in mounts_below(root):
        run("umount", "-l", point, check=False)


# ---------------------------------------------------------------- the machine's real state


def loop_devices_below(root: Path) -> dict[str, str]:
    """{device: backing file} of the loop devices whose file lies under root (also when the
    file was deleted since), read from /sys."""
    top = str(root.resolve())
    found = {}
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            path = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:  # detached meanwhile
            continue
        if path.startswith(top + "/"):
            found[f"/dev/{backing.parent.parent.name}"] = path
    return found


def detach_loop_device(device: str) -> None:
    # A device still open elsewhere is marked to detach itself once closed (autoclear).
    run("losetup", "-d", device, check=False)


def links_matching(pattern: str) -> list[str]:
    """Names of the network links whose full name matches the regular expression."""
    out = run("ip", "-o", "link", "show", check=False).stdout
    names = [line.split(":", 2)[1].strip().split("@", 1)[0] for line in out.splitlines()]
    return [name for name in names if re.fullmatch(pattern, name)]


def nft_tables_matching(pattern: str) -> list[str]:
    """Names of the host's inet nftables tables whose full name matches the expression (the
    perimeter's, apps/clusters/perimeter.py); none when nft is not installed."""
    try:
        out = run("nft", "list", "tables", "inet", check=False).stdout
    except FileNotFoundError:
        return []
    names = [line.split()[-1] for line in out.splitlines() if line.startswith("table inet ")]
    return [name for name in names if re.fullmatch(pattern, name)]


def delete_nft_table(name: str) -> None:
    run("nft", "delete", "table", "inet", name, check=False)  # gone already: nothing to do


@dataclass(frozen=True)
class Process:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command[:120]})"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # gone meanwhile, or a kernel thread
        return b""


def process(pid: int) -> Process | None:
    command = _read(Path(f"/proc/{pid}/cmdline")).replace(b"\0", b" ").decode(errors="replace")
    return Process(pid, command.strip()) if command else None


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        pid = _parent(pid)
    return pids


def _parent(pid: int) -> int:
    stat = _read(Path(f"/proc/{pid}/stat")).decode(errors="replace")
    return int(stat.rsplit(")", 1)[1].split()[1]) if stat else 0


def processes_of(roots: list[Path]) -> list[Process]:
    """Processes that belong to the folders in roots: named in their command line (daemons,
    containerd, shims, sshd, ssh masters) or given as their DOCKER_HOST (an ssh session's
    `docker system dial-stdio`), and all their descendants (the containers under a shim).
    Never this process or its parents."""
    tops = [str(root.resolve()) for root in roots]
    mine = _ancestors()
    children: dict[int, list[int]] = {}
    matched: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        children.setdefault(_parent(pid), []).append(pid)
        found = process(pid)
        if found is None or pid in mine:
            continue
        docker_host = next(
            (v for v in _read(entry / "environ").split(b"\0") if v.startswith(b"DOCKER_HOST=")),
            b"",
        ).decode(errors="replace")
        if any(_names(found.command, top) or _names(docker_host, top) for top in tops):
            matched.append(pid)
    result, seen = [], set(mine)
    while matched:
        pid = matched.pop()
        if pid in seen:
            continue
        seen.add(pid)
        matched.extend(children.get(pid, []))
        found = process(pid)
        if found is not None:
            result.append(found)
    return sorted(result, key=lambda p: p.pid)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def _names(text: str, top: str) -> bool:
    """The text names top or a path under it (not merely a longer name that starts the same)."""
    for word in text.split():
        value = word.split("=", 1)[-1]  # --flag=PATH, NAME=PATH
        if _under(value.split("://", 1)[-1], top):  # unix:///PATH
            return True
    return False


def kill_processes(found: list[Process], seconds: float = 10) -> list[Process]:
    """SIGTERM, then SIGKILL what still runs after `seconds`; returns what survived both."""
    for target in found:
        with suppress(ProcessLookupError):  # exited before the signal
            os.kill(target.pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    alive = found
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if _running(p)]
    for target in alive:
        with suppress(ProcessLookupError):  # exited before the signal
            os.kill(target.pid, signal.SIGKILL)
    time.sleep(0.2)
    return [p for p in alive if _running(p)]


def _running(target: Process) -> bool:
    """Still there and not a zombie (the same pid may be reused: compare the command)."""
    stat = _read(Path(f"/proc/{target.pid}/stat")).decode(errors="replace")
    if not stat or stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    again = process(target.pid)
    return again is not None and again.command == target.command


def listeners() -> list[tuple[str, int, int]]:
    """(address, port, socket inode) of every listening IPv4 TCP socket."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] != "0A":  # TCP_LISTEN
            continue
        address, port = fields[1].split(":")
        ip = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
        found.append((ip, int(port, 16), int(fields[9])))
    return found


def socket_owners(inodes: set[int]) -> dict[int, int]:
    """{socket inode: pid} of the processes holding those sockets open."""
    owners: dict[int, int] = {}
    targets = {f"socket:[{inode}]": inode for inode in inodes}
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            for fd in fd_dir.iterdir():
                link = os.readlink(fd)
                if link in targets:
                    owners.setdefault(targets[link], int(fd_dir.parent.name))
        except OSError:  # exited meanwhile, or not ours to read
            continue
    return owners
