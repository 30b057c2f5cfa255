"""Where an instance sees its dedicated disks inside its container.

The catalog's own products use /data/1 .. /data/N. A definition may list other destinations per
role (``disk_paths``; a registered CESGA template declares its own, e.g. /data/0 or /srv/db):
disk K is mounted at the K-th path. A list numbered /data/<n>, /data/<n+1>, ... goes on in that
numbering for instances with more disks than it names, so a role whose disk count is an option
needs only its first path. Both the typed definition (spec.py) and the CESGA import check paths
here, so a registered product and a catalog product share one rule and one code path."""

from __future__ import annotations

import posixpath
import re

NUMBERED = re.compile(r"(/.*?)([0-9]{1,4})")
# Mounting over (or above) these would hide what the container needs to run.
SYSTEM_DIRS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
    "/tmp",  # noqa: S108 - a path refused, not a file used
)
# Kernel-provided trees: nothing of the container's own may be mounted inside them.
VIRTUAL_DIRS = ("/dev", "/proc", "/sys", "/run")
MAX_LENGTH = 200


def default_paths(count: int) -> list[str]:
    return [f"/data/{n}" for n in range(1, count + 1)]


def path_problem(path: object) -> str | None:
    """Why ``path`` cannot hold a dedicated disk, or None when it can."""
    if not isinstance(path, str) or not path.startswith("/"):
        return f"must be an absolute path in the container, got {path!r}"
    if len(path) > MAX_LENGTH or any(c in path for c in ":,\0\n\\"):
        return f"must be a plain path (no ':', ',', '\\\\', at most {MAX_LENGTH} characters)"
    if posixpath.normpath(path) != path or path.startswith("//"):
        return f"must be a normalised path (no '.', '..', '//' or trailing '/'), got {path!r}"
    if path == "/":
        return "/ would hide the container's whole file system"
    for system in SYSTEM_DIRS:
        if path == system or system.startswith(path + "/"):
            return f"{path} would hide the container's {system}"
    for virtual in VIRTUAL_DIRS:
        if path.startswith(virtual + "/"):
            return f"{path} lies inside {virtual}, which the kernel provides"
    return None


def list_problems(paths: list[str]) -> list[tuple[int, str]]:
    """(index, problem) for every bad or repeated path, and nested ones (one would hide the
    other)."""
    found = [(n, problem) for n, path in enumerate(paths) if (problem := path_problem(path))]
    for n, path in enumerate(paths):
        for other in paths[:n]:
            if path == other:
                found.append((n, f"{path} is used by another disk"))
            elif path.startswith(other + "/") or other.startswith(path + "/"):
                found.append((n, f"{path} and {other} are nested: one would hide the other"))
    return found


def extends(paths: list[str]) -> bool:
    """True when ``paths`` is numbered /x/<n>, /x/<n+1>, ... and so can go on for more disks."""
    matches = [NUMBERED.fullmatch(p) for p in paths]
    if not paths or not all(matches):
        return False
    stems = {m.group(1) for m in matches if m}
    numbers = [int(m.group(2)) for m in matches if m]
    return len(stems) == 1 and numbers == list(range(numbers[0], numbers[0] + len(numbers)))


def destinations(paths: list[str], count: int) -> list[str]:
    """The container paths of an instance's ``count`` disks."""
    if not paths:
        return default_paths(count)
    if count <= len(paths):
        return list(paths[:count])
    if not extends(paths):
        raise ValueError(f"only {len(paths)} disk paths are defined, for {count} disks")
    first = NUMBERED.fullmatch(paths[0])
    assert first is not None
    stem, start = first.group(1), int(first.group(2))
    return [f"{stem}{start + k}" for k in range(count)]
