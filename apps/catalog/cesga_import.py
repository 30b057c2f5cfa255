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

- The rendered nodes become roles (apps.catalog.cesga_nodes: nodes of one kind with the same
  image, cpu, mem and disks form one role; each ``diskK`` a dedicated disk at its destination;
  docker_opts that would escape the container refused, harmless ones mapped or ignored).
- An int option that moves one role property one to one (render with size+1: the worker
  role has one more node) becomes an option that ``sets`` it (count, cores, memory_mb or
  disks). Any other option that changes the nodes is kept at its default (a warning says
  so); options that change no node are product parameters, as placeholders for commands.
- A node may carry ``"command"`` (a string for ``sh -c`` or a list), a Platter extension for
  images whose own command does not keep running.

The orchestrator script is never run: an admin converts it into the version's configure steps.
Every problem raises RegistrationError with a message naming the node, option or field.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import disk_paths
from .cesga_nodes import FLOOR, Group, RegistrationError, group_nodes, layout
from .cesga_render import CPU_SECONDS, MEMORY_BYTES
from .options import LAUNCH_KEYS, SECTIONS, check_value

RENDERER = Path(__file__).with_name("cesga_render.py")
MAX_TEMPLATE = 64 * 1024  # characters of template source
RENDER_TIMEOUT = 30  # seconds of wall time; the renderer's own CPU limit is 5 s
OPTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")
REGISTRATION_CLUSTERID = "registration"
# Upper bounds of what an option may ask for when the template leaves it open; the pool's
# capacity and the user's quota still decide at launch.
OPEN_MAX = {"count": 16, "cores": 16, "memory_mb": 65536, "disks": 8}
PROPS = ("count", "cores", "memory_mb", "disks")


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
    base = layout(groups)

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
        probed = layout(group_nodes(_parse(result["output"], f" with {name}={probe}"), []))
    except RegistrationError:
        return "fixed"  # the template only works with the default
    if probed == base:
        return None
    if set(probed) != set(base) or not isinstance(default, int) or isinstance(default, bool):
        return "fixed"
    changed: dict[str, list[str]] = {}
    for role, (image, props) in base.items():
        other_image, other = probed[role]
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
    role: dict[str, Any] = {
        "name": group.name,
        "image": group.first.image,
        "description": f"CESGA nodes {nodes}",
    }
    for prop in PROPS:
        value = values[prop]
        low, high = (min(FLOOR[prop], value), max(OPEN_MAX[prop], value))
        bounds = (
            {"min": low, "default": value, "max": high}
            if prop in open_props
            else {"min": value, "default": value, "max": value}
        )
        if prop == "count":
            role.update(bounds)
        else:
            role[prop] = bounds
    if list(group.first.disk_paths) != disk_paths.default_paths(group.first.disks):
        role["disk_paths"] = list(group.first.disk_paths)
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
            definition = {
                "type": "choice",
                "choices": [option.default],
                "default": option.default,
                "description": description,
            }
        _, problem = check_value(definition, option.default)
        if problem:
            raise RegistrationError(f"option {option.name!r}: default {problem}")
        schema[option.section][option.name] = definition
    return schema
