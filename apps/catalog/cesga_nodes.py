"""The nodes of a rendered CESGA template as Platter roles (apps.catalog.cesga_import renders).

Each node is checked (image, whole cpu and mem within bounds, disks at absolute paths that hide
no system directory), its
``docker_opts`` policed: options that would let a container escape (privileged, host
namespaces, devices, capabilities, host paths) are refused naming the option; ``-e`` becomes
environment and ``-u`` the user; harmless ones are ignored with a warning. Platter never hands
docker_opts to Docker: what is not mapped has no effect, and a warning says so.

Nodes of one kind (the same name without its trailing number) with the same image, cpu, mem and
disks form one role, named after that kind.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from . import disk_paths

FLOOR = {"count": 1, "cores": 1, "memory_mb": 64, "disks": 0}
CEILING = {"cores": 1024, "memory_mb": 16 * 1024 * 1024}  # far beyond any node
NODE_KEYS = {"docker_image", "docker_opts", "cpu", "mem", "disks", "networks", "command"}


class RegistrationError(ValueError):
    """A template or options Platter cannot register; the message names the problem."""


# docker run options that take a value, so an ignored one also skips its value.
TAKES_VALUE = {
    "-e",
    "--env",
    "-h",
    "--hostname",
    "-p",
    "--publish",
    "-m",
    "--memory",
    "--cpus",
    "--cpu-shares",
    "-c",
    "-u",
    "--user",
    "-w",
    "--workdir",
    "--entrypoint",
    "--name",
    "-l",
    "--label",
    "--add-host",
    "--dns",
    "--dns-search",
    "--ulimit",
    "--shm-size",
    "--restart",
    "--log-driver",
    "--log-opt",
    "--expose",
    "--link",
    "--network",
    "--net",
    "-v",
    "--volume",
    "--mount",
    "--device",
    "--cap-add",
    "--cap-drop",
    "--security-opt",
    "--pid",
    "--ipc",
    "--uts",
    "--userns",
    "--cgroupns",
    "--env-file",
    "--volumes-from",
    "--runtime",
    "--sysctl",
    "--tmpfs",
    "--stop-signal",
    "--device-cgroup-rule",
    "--cgroup-parent",
    "--ip",
    "--mac-address",
}
ALWAYS_REFUSED = {
    "--privileged": "gives the container every device and capability of the node",
    "--device": "hands a node device to the container",
    "--device-cgroup-rule": "opens node devices to the container",
    "--cap-add": "gives the container capabilities Platter drops",
    "--security-opt": "lifts the container's seccomp/AppArmor confinement",
    "--volumes-from": "mounts another container's volumes",
    "--mount": "mounts a path of the node",
    "--env-file": "reads a file of the host",
    "--runtime": "changes the container runtime",
    "--sysctl": "changes kernel settings",
    "--cgroup-parent": "moves the container out of its resource limits",
}
HOST_NAMESPACES = {"--net", "--network", "--pid", "--ipc", "--uts", "--userns", "--cgroupns"}
# Mapped onto the role (-e, -u) or checked against the instance's disks (-v): not ignored.
MAPPED = {"-e", "--env", "-u", "--user", "-v", "--volume"}
# Ignored with a warning: flags without a value, and every valued option not refused, not a
# namespace (checked for "host") and not mapped.
HARMLESS = {
    "-t",
    "--tty",
    "-i",
    "--interactive",
    "-d",
    "--detach",
    "--rm",
    "--init",
    "-P",
    "--publish-all",
} | (TAKES_VALUE - set(ALWAYS_REFUSED) - HOST_NAMESPACES - MAPPED)


@dataclass
class DockerOpts:
    environment: dict[str, str] = field(default_factory=dict)
    user: str | None = None


def parse_docker_opts(text: Any, node: str, disks: set[str], warnings: list[str]) -> DockerOpts:
    if text is None or text == "":
        return DockerOpts()
    if not isinstance(text, str):
        raise RegistrationError(f"node {node}: docker_opts must be a string")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise RegistrationError(f"node {node}: docker_opts: {exc}") from None
    found = DockerOpts()
    ignored: list[str] = []
    n = 0
    while n < len(words):
        word = words[n]
        n += 1
        name, has_value, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in TAKES_VALUE and not has_value:
            if n >= len(words):
                raise RegistrationError(f"node {node}: docker_opts {name} needs a value")
            value = words[n]
            n += 1
        refused = _refusal(name, value, disks)
        if refused:
            raise RegistrationError(
                f"node {node}: docker_opts {word if has_value else f'{name} {value}'.strip()} "
                f"refused: {refused}"
            )
        if name in ("-e", "--env"):
            key, equals, val = value.partition("=")
            if not equals or not key:
                raise RegistrationError(f"node {node}: docker_opts -e {value}: expected NAME=value")
            found.environment[key] = val
        elif name in ("-u", "--user"):
            found.user = value
        elif name in ("-v", "--volume"):
            ignored.append(f"{name} {value} (Platter mounts the instance's disks itself)")
        elif name in HOST_NAMESPACES or name in HARMLESS:
            ignored.append(f"{name} {value}".strip())
        else:
            ignored.append(f"{word} (unknown to Platter)")
    if ignored:
        warnings.append(f"node {node}: docker_opts ignored: {'; '.join(ignored)}")
    return found


def _refusal(name: str, value: str, disks: set[str]) -> str | None:
    if name in ALWAYS_REFUSED:
        return ALWAYS_REFUSED[name]
    if name in HOST_NAMESPACES and (value == "host" or value.startswith("container:")):
        return "shares a namespace of the node or of another container"
    if name in ("-v", "--volume"):
        parts = value.split(":")
        target = parts[1] if len(parts) > 1 else parts[0]
        if len(parts) == 1 or target not in disks:
            return "mounts a path or volume of the node other than the instance's disks"
    return None


@dataclass(frozen=True)
class Node:
    name: str
    stem: str
    image: str
    cores: int
    memory_mb: int
    disks: int
    disk_paths: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    user: str | None
    command: tuple[str, ...] | None

    @property
    def key(self) -> tuple:
        return (self.stem, self.image, self.cores, self.memory_mb, self.disks, self.disk_paths)


def parse_node(name: str, spec: Any, warnings: list[str]) -> Node:
    where = f"node {name}"
    if not isinstance(spec, dict):
        raise RegistrationError(f"{where}: must be an object")
    for key in ("docker_image", "cpu", "mem"):
        if key not in spec:
            raise RegistrationError(f"{where}: missing field {key!r}")
    image = spec["docker_image"]
    if not isinstance(image, str) or not image.strip() or len(image) > 255:
        raise RegistrationError(f"{where}: docker_image must be an image name")
    cores = _whole(spec["cpu"], f"{where}: cpu", FLOOR["cores"], CEILING["cores"])
    memory = _whole(spec["mem"], f"{where}: mem (MB)", FLOOR["memory_mb"], CEILING["memory_mb"])
    destinations = _disk_destinations(spec.get("disks", {}), where)
    opts = parse_docker_opts(spec.get("docker_opts"), name, set(destinations), warnings)
    extra = sorted(set(spec) - NODE_KEYS)
    if extra:
        warnings.append(f"{where}: fields ignored: {', '.join(extra)}")
    return Node(
        name=name,
        stem=re.sub(r"[-_.]*[0-9]+$", "", name) or name,
        image=image.strip(),
        cores=cores,
        memory_mb=memory,
        disks=len(destinations),
        disk_paths=tuple(destinations),
        environment=tuple(sorted(opts.environment.items())),
        user=opts.user,
        command=_command(spec.get("command"), where),
    )


def _whole(value: Any, where: str, floor: int, ceiling: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RegistrationError(f"{where} must be a whole number, got {json.dumps(value)[:40]}")
    if not floor <= value <= ceiling:
        raise RegistrationError(f"{where} must be between {floor} and {ceiling}, got {value}")
    return value


def _disk_destinations(disks: Any, where: str) -> list[str]:
    """The container paths the template declares for the node's disks, in diskK order: Platter
    mounts each dedicated disk exactly there (apps/catalog/disk_paths.py)."""
    if not isinstance(disks, dict):
        raise RegistrationError(f"{where}: disks must map diskK to {{'destination': ...}}")
    named = list(disks.items())
    numbers = [re.search(r"[0-9]+$", str(name)) for name, _ in named]
    if all(numbers):  # disk0, disk1, ... in number order; else as written
        order = [int(found.group()) for found in numbers if found]
        named = [item for _, item in sorted(zip(order, named, strict=True), key=lambda p: p[0])]
    paths: list[str] = []
    for disk, spec in named:
        destination = spec.get("destination") if isinstance(spec, dict) else None
        problem = disk_paths.path_problem(destination)
        if problem or not isinstance(destination, str):
            raise RegistrationError(f"{where}: {disk} destination: {problem}")
        paths.append(destination)
    for k, problem in disk_paths.list_problems(paths):
        raise RegistrationError(f"{where}: {named[k][0]} destination: {problem}")
    return paths


def _command(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return ("sh", "-c", value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise RegistrationError(f"{where}: command must be a string or a list of strings")


@dataclass
class Group:
    name: str
    nodes: list[Node]

    @property
    def first(self) -> Node:
        return self.nodes[0]

    def props(self) -> dict[str, int]:
        n = self.first
        return {
            "count": len(self.nodes),
            "cores": n.cores,
            "memory_mb": n.memory_mb,
            "disks": n.disks,
        }


def group_nodes(rendered: dict, warnings: list[str]) -> list[Group]:
    """Nodes of one kind with the same image, cpu, mem and disks, as roles in order."""
    groups: dict[tuple, list[Node]] = {}
    for name, spec in rendered["nodes"].items():
        node = parse_node(str(name), spec, warnings)
        groups.setdefault(node.key, []).append(node)
    named: list[Group] = []
    taken: set[str] = set()
    for nodes in groups.values():
        base = re.sub(r"[^a-z0-9_]+", "_", nodes[0].stem.lower()).strip("_")
        base = (base if base[:1].isalpha() else f"r_{base}")[:28] or "role"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        named.append(Group(name, nodes))
    return named


def layout(groups: list[Group]) -> dict[str, tuple]:
    return {g.name: (g.first.image, g.props()) for g in groups}
