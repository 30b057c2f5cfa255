"""CESGA product registration: a CESGA template and options turned into a Platter definition.

CESGA's PaaS describes a product by a json+jinja2 template, rendered with ``opts`` (the
launch options) and ``clusterid``, that yields::

    {"dnsname": "...",
     "nodes": {"master": {"docker_image": "...", "docker_opts": "-e A=1", "cpu": 1,
                          "mem": 1024, "disks": {"disk1": {"destination": "/data/1"}},
                          "networks": {...}}, ...},
     "services": {"namenode": {"nodes": ["master"], ...}, ...}}

and by options ``{"required": {...}, "optional": {...}, "advanced": {...}, "descriptions":
{...}}`` whose values are the defaults. Platter launches from roles instead, so the template is
rendered here once with the defaults (and once per option with another value, to see what
the option changes) and never at launch:

- Nodes of one kind (the same name without its trailing number) with the same image, cpu,
  mem and disks form one role. Each ``diskK`` is a dedicated disk; an instance's disks are
  mounted at /data/1..N, so destinations must be /data/<n>.
- An int option that moves one role property one to one (render with size+1: the worker
  role has one more node) becomes an option that ``sets`` it (count, cores, memory_mb or
  disks). Any other option that changes the nodes is kept at its default (a warning says
  so); options that change no node are product parameters, as placeholders for commands.
- ``docker_opts`` that would let a container escape (privileged, host namespaces, devices,
  capabilities, host paths) are refused; ``-e`` becomes the role's environment, ``-u`` its
  user; the rest is ignored with a warning.
- A node may carry ``"command"`` (a string for ``sh -c`` or a list), a Platter extension for
  images whose own command does not keep running.

The orchestrator script is never run: an admin converts it into the version's configure steps.
Every problem raises RegistrationError with a message naming the node, option or field.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cesga_render import CPU_SECONDS, MEMORY_BYTES
from .options import LAUNCH_KEYS, SECTIONS, check_value

RENDERER = Path(__file__).with_name("cesga_render.py")
MAX_TEMPLATE = 64 * 1024  # characters of template source
RENDER_TIMEOUT = 30  # seconds of wall time; the renderer's own CPU limit is 5 s
OPTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")
ROLE_NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")
DISK_DESTINATION = re.compile(r"/data/([1-9][0-9]{0,3})")
REGISTRATION_CLUSTERID = "registration"
# Upper bounds of what an option may ask for when the template leaves it open; the pool's
# capacity and the user's quota still decide at launch.
OPEN_MAX = {"count": 16, "cores": 16, "memory_mb": 65536, "disks": 8}
FLOOR = {"count": 1, "cores": 1, "memory_mb": 64, "disks": 0}
CEILING = {"cores": 1024, "memory_mb": 16 * 1024 * 1024}  # far beyond any node
NODE_KEYS = {"docker_image", "docker_opts", "cpu", "mem", "disks", "networks", "command"}
PROPS = ("count", "cores", "memory_mb", "disks")


class RegistrationError(ValueError):
    """A template or options Platter cannot register; the message names the problem."""


@dataclass
class Converted:
    image: str
    roles: list[dict]
    options_schema: dict
    warnings: list[str] = field(default_factory=list)
    rendered: dict = field(default_factory=dict)  # the template with the defaults


# ---------------------------------------------------------------- options


@dataclass
class CesgaOption:
    name: str
    section: str
    default: Any
    description: str


def parse_options(raw: Any) -> list[CesgaOption]:
    if not isinstance(raw, dict):
        raise RegistrationError(f"options: must be a JSON object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {*SECTIONS, "descriptions"})
    if unknown:
        raise RegistrationError(
            f"options: unknown section {unknown[0]!r} (allowed: {', '.join(SECTIONS)}, "
            "descriptions)"
        )
    descriptions = raw.get("descriptions") or {}
    if not isinstance(descriptions, dict):
        raise RegistrationError("options.descriptions: must map option names to text")
    found: list[CesgaOption] = []
    seen: set[str] = set()
    for section in SECTIONS:
        values = raw.get(section) or {}
        if not isinstance(values, dict):
            raise RegistrationError(f"options.{section}: must map option names to defaults")
        for name, default in values.items():
            where = f"option {name!r}"
            if not OPTION_NAME.fullmatch(name) or name in LAUNCH_KEYS:
                raise RegistrationError(
                    f"{where}: not a valid Platter option name (lower-case letters, digits and "
                    "_, starting with a letter, at most 31 characters; not one of "
                    f"{', '.join(sorted(LAUNCH_KEYS))})"
                )
            if name in seen:
                raise RegistrationError(f"{where}: in more than one section")
            seen.add(name)
            text = descriptions.get(name)
            found.append(CesgaOption(name, section, default, text if isinstance(text, str) else ""))
    return found


def check_options(raw: Any) -> None:
    """Options Platter can take (names, sections, types), before any template is there."""
    for option in parse_options(raw):
        _option_type(option)


def _option_type(option: CesgaOption) -> dict:
    value = option.default
    if isinstance(value, bool):
        return {"type": "bool"}
    if isinstance(value, int):
        return {"type": "int"}
    if isinstance(value, float) and value.is_integer():
        option.default = int(value)
        return {"type": "int"}
    if isinstance(value, str):
        return {"type": "str"}
    if isinstance(value, list) and value and all(isinstance(v, (int, str)) for v in value):
        option.default = value[0]
        return {"type": "choice", "choices": value}
    raise RegistrationError(
        f"option {option.name!r}: default {json.dumps(value)[:40]} is not a whole number, "
        "text, true/false or a list of choices"
    )


def _probe_value(option: CesgaOption, kind: dict) -> Any:
    """Another valid value, to render with and see what the option changes."""
    if kind["type"] == "int":
        return option.default + 1
    if kind["type"] == "bool":
        return not option.default
    if kind["type"] == "choice":
        others = [c for c in kind["choices"] if c != option.default]
        return others[0] if others else None
    return option.default + "x"


# ---------------------------------------------------------------- rendering


def render(template: str, contexts: list[dict]) -> list[dict]:
    """Each context rendered, in Jinja2's sandbox in a limited child process (cesga_render):
    ``{"output": text}`` or ``{"error": problem}`` for each."""
    if not isinstance(template, str) or not template.strip():
        raise RegistrationError("template: empty")
    if len(template) > MAX_TEMPLATE:
        raise RegistrationError(f"template: longer than {MAX_TEMPLATE} characters")
    request = json.dumps({"template": template, "contexts": contexts})
    try:
        done = subprocess.run(
            [sys.executable, "-I", str(RENDERER)],
            input=request,
            capture_output=True,
            text=True,
            timeout=RENDER_TIMEOUT,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
    except subprocess.TimeoutExpired:
        raise RegistrationError(
            f"template: rendering took more than {RENDER_TIMEOUT} s; refused"
        ) from None
    if done.returncode != 0:
        # Killed by its CPU limit (SIGXCPU/SIGKILL) or out of memory outside Python's reach.
        raise RegistrationError(
            f"template: rendering needs more than {CPU_SECONDS} s of CPU or "
            f"{MEMORY_BYTES >> 20} MB of memory; refused"
        )
    return json.loads(done.stdout)["results"]


def _parse(text: str, label: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RegistrationError(
            f"template{label}: the rendered text is not JSON ({exc.msg} at line {exc.lineno})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict) or not data["nodes"]:
        raise RegistrationError(f"template{label}: must yield an object with a non-empty 'nodes'")
    return data


# ---------------------------------------------------------------- nodes to roles

# docker run options that take a value, so an ignored one also skips its value.
TAKES_VALUE = {
    "-e", "--env", "-h", "--hostname", "-p", "--publish", "-m", "--memory", "--cpus",
    "--cpu-shares", "-c", "-u", "--user", "-w", "--workdir", "--entrypoint", "--name", "-l",
    "--label", "--add-host", "--dns", "--dns-search", "--ulimit", "--shm-size", "--restart",
    "--log-driver", "--log-opt", "--expose", "--link", "--network", "--net", "-v", "--volume",
    "--mount", "--device", "--cap-add", "--cap-drop", "--security-opt", "--pid", "--ipc",
    "--uts", "--userns", "--cgroupns", "--env-file", "--volumes-from", "--runtime", "--sysctl",
    "--tmpfs", "--stop-signal", "--device-cgroup-rule", "--cgroup-parent", "--ip", "--mac-address",
}  # fmt: skip
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
HARMLESS = {
    "-t", "--tty", "-i", "--interactive", "-d", "--detach", "--rm", "--init", "-h",
    "--hostname", "-p", "--publish", "-P", "--publish-all", "-m", "--memory", "--cpus",
    "--cpu-shares", "-c", "-w", "--workdir", "--name", "-l", "--label", "--add-host", "--dns",
    "--dns-search", "--ulimit", "--shm-size", "--restart", "--log-driver", "--log-opt",
    "--expose", "--link", "--cap-drop", "--tmpfs", "--stop-signal", "--entrypoint", "--ip",
    "--mac-address",
}  # fmt: skip


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
    environment: tuple[tuple[str, str], ...]
    user: str | None
    command: tuple[str, ...] | None

    @property
    def key(self) -> tuple:
        return (self.stem, self.image, self.cores, self.memory_mb, self.disks)


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
    destinations = _disk_destinations(spec.get("disks", {}), where, warnings)
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


def _disk_destinations(disks: Any, where: str, warnings: list[str]) -> list[str]:
    if not isinstance(disks, dict):
        raise RegistrationError(f"{where}: disks must map diskK to {{'destination': ...}}")
    numbers: list[int] = []
    for disk, spec in disks.items():
        destination = spec.get("destination") if isinstance(spec, dict) else None
        found = DISK_DESTINATION.fullmatch(destination) if isinstance(destination, str) else None
        if not found:
            raise RegistrationError(
                f"{where}: {disk} destination {destination!r}: Platter mounts an instance's "
                "dedicated disks at /data/1 .. /data/N; use /data/<n>"
            )
        numbers.append(int(found.group(1)))
    if sorted(numbers) != list(range(1, len(numbers) + 1)):
        warnings.append(
            f"{where}: disks at {', '.join(f'/data/{n}' for n in sorted(numbers))} are mounted "
            f"at /data/1 .. /data/{len(numbers)} in that order"
        )
    return [f"/data/{n}" for n in range(1, len(numbers) + 1)]


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
        return {"count": len(self.nodes), "cores": n.cores, "memory_mb": n.memory_mb,
                "disks": n.disks}  # fmt: skip


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


def _layout(groups: list[Group]) -> dict[str, tuple]:
    return {g.name: (g.first.image, g.props()) for g in groups}


# ---------------------------------------------------------------- the conversion


def convert(template: str, options: Any) -> Converted:
    """The roles and options schema a CESGA template and options register as."""
    cesga_options = parse_options(options)
    kinds = {o.name: _option_type(o) for o in cesga_options}
    defaults = {o.name: o.default for o in cesga_options}
    probes = {o.name: _probe_value(o, kinds[o.name]) for o in cesga_options}
    probed = [name for name, value in probes.items() if value is not None]

    contexts = [{"opts": defaults, "clusterid": REGISTRATION_CLUSTERID}]
    contexts += [
        {"opts": {**defaults, name: probes[name]}, "clusterid": REGISTRATION_CLUSTERID}
        for name in probed
    ]
    results = render(template, contexts)
    if "error" in results[0]:
        raise RegistrationError(f"template: {results[0]['error']}")

    warnings: list[str] = []
    rendered = _parse(results[0]["output"], "")
    groups = group_nodes(rendered, warnings)
    base = _layout(groups)

    sets: dict[str, tuple[str, list[str]]] = {}
    fixed: set[str] = set()
    for name, result in zip(probed, results[1:], strict=True):
        found = _what_it_sets(name, defaults[name], probes[name], result, base)
        if found == "fixed":
            fixed.add(name)
            warnings.append(
                f"option {name}: another value changes the nodes in a way Platter cannot map "
                f"onto roles; it is kept at its default {json.dumps(defaults[name])}"
            )
        elif isinstance(found, tuple):
            sets[name] = found

    roles = [_role(g, sets) for g in groups]
    schema = _schema(cesga_options, kinds, sets, fixed, warnings)
    services = _check_services(rendered)
    if services:
        warnings.append(
            f"services {', '.join(services)}: kept with the registration; the version's "
            "configure steps are empty until an admin converts the orchestrator into them"
        )
    return Converted(
        image=groups[0].first.image,
        roles=roles,
        options_schema=schema,
        warnings=warnings,
        rendered=rendered,
    )


def _check_services(rendered: dict) -> list[str]:
    services = rendered.get("services") or {}
    if not isinstance(services, dict):
        raise RegistrationError("template: services must map service names to {'nodes': [...]}")
    for service, spec in services.items():
        members = spec.get("nodes") if isinstance(spec, dict) else None
        if not isinstance(members, list):
            raise RegistrationError(f"service {service}: missing field 'nodes' (a list)")
        for member in members:
            if member not in rendered["nodes"]:
                raise RegistrationError(f"service {service}: no node named {member!r}")
    return list(services)


def _what_it_sets(
    name: str, default: Any, probe: Any, result: dict, base: dict[str, tuple]
) -> tuple[str, list[str]] | str | None:
    """(property, roles) when the option moves one role property one to one; None when it
    changes no node; "fixed" when it changes them some other way."""
    if "error" in result:
        return "fixed"  # the template only works with the default
    try:
        layout = _layout(group_nodes(_parse(result["output"], f" with {name}={probe}"), []))
    except RegistrationError:
        return "fixed"  # the template only works with the default
    if layout == base:
        return None
    if set(layout) != set(base) or not isinstance(default, int) or isinstance(default, bool):
        return "fixed"
    changed: dict[str, list[str]] = {}
    for role, (image, props) in base.items():
        other_image, other = layout[role]
        if other_image != image:
            return "fixed"
        for prop in PROPS:
            if props[prop] != other[prop]:
                if (props[prop], other[prop]) != (default, probe):
                    return "fixed"
                changed.setdefault(prop, []).append(role)
    if len(changed) != 1:
        return "fixed"
    prop, roles = next(iter(changed.items()))
    return prop, roles


def _role(group: Group, sets: dict[str, tuple[str, list[str]]]) -> dict:
    open_props = {prop for prop, roles in sets.values() if group.name in roles}
    values = group.props()
    nodes = ", ".join(n.name for n in group.nodes)
    role: dict[str, Any] = {"name": group.name, "image": group.first.image,
                            "description": f"CESGA nodes {nodes}"}  # fmt: skip
    for prop in PROPS:
        value = values[prop]
        low, high = (min(FLOOR[prop], value), max(OPEN_MAX[prop], value))
        bounds = {"min": low, "default": value, "max": high} if prop in open_props else {
            "min": value, "default": value, "max": value}  # fmt: skip
        if prop == "count":
            role.update(bounds)
        else:
            role[prop] = bounds
    common = _common_environment(group)
    if common:
        role["environment"] = common
    if group.first.user:
        role["user"] = group.first.user
    if group.first.command:
        role["command"] = list(group.first.command)
    return role


def _common_environment(group: Group) -> dict[str, str]:
    envs = [dict(n.environment) for n in group.nodes]
    return {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}


def _schema(
    cesga_options: list[CesgaOption],
    kinds: dict[str, dict],
    sets: dict[str, tuple[str, list[str]]],
    fixed: set[str],
    warnings: list[str],
) -> dict:
    schema: dict[str, dict] = {section: {} for section in SECTIONS}
    for option in cesga_options:
        definition: dict[str, Any] = {**kinds[option.name], "default": option.default}
        description = option.description.strip()
        if not description:
            description = option.name.replace("_", " ").capitalize()
            warnings.append(f"option {option.name}: no description; {description!r} is shown")
        definition["description"] = description
        if option.name in sets:
            prop, roles = sets[option.name]
            definition.update(sets=prop, roles=roles)
            definition["min"] = min(FLOOR[prop], option.default)
            definition["max"] = max(OPEN_MAX[prop], option.default)
        elif option.name in fixed:
            definition = {"type": "choice", "choices": [option.default],
                          "default": option.default, "description": description}  # fmt: skip
        _, problem = check_value(definition, option.default)
        if problem:
            raise RegistrationError(f"option {option.name!r}: default {problem}")
        schema[option.section][option.name] = definition
    return schema
