"""Checks that a ProductVersion's JSON fields are well formed, so a broken schema never saves.

Shapes are documented in apps/catalog/options.py. Every problem is reported at once, keyed by
the model field it lives in, with a path such as ``roles[1].cores.max`` in the message.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError

from .options import (
    DISK_KINDS,
    LAUNCH_KEYS,
    OPTION_TYPES,
    RESOURCE_FLOORS,
    ROLE_PROPERTIES,
    SECTIONS,
    check_value,
    role_resource,
)
from .templating import known_placeholders, placeholders_in

if TYPE_CHECKING:
    from .models import ProductVersion

NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")
# Docker accepts any name without "="; some images read names such as CORE-SITE.XML_fs.x.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
ROLE_KEYS = {
    "name",
    "min",
    "max",
    "default",
    "cores",
    "memory_mb",
    "disks",
    "image",
    "command",
    "environment",
    "description",
    "user",
    "data_settings",
}
RESOURCE_KEYS = {"min", "default", "max"}
OPTION_KEYS = {
    "type",
    "default",
    "min",
    "max",
    "choices",
    "max_length",
    "pattern",
    "description",
    "sets",
    "roles",
}
PORT_KEYS = {"role", "port", "name", "protocol", "scheme", "ui", "connect"}
STEP_KEYS = {"role", "command", "description", "timeout", "once"}


def validate_definition(version: ProductVersion) -> None:
    problems: dict[str, list[str]] = defaultdict(list)
    if version.disk_kind not in DISK_KINDS:
        problems["disk_kind"].append(
            f"must be one of {', '.join(DISK_KINDS)}, got {version.disk_kind!r}"
        )
    role_names = _check_roles(version.roles, problems["roles"])
    if not problems["roles"]:
        _check_options(version, role_names, problems["options_schema"])
    _check_ports(version.ports, role_names, problems["ports"])
    _check_environment(version, problems["environment"])
    _check_configure(version, role_names, problems["configure"])
    if not isinstance(version.capabilities, list) or not all(
        isinstance(c, str) and re.fullmatch(r"[A-Z_]+", c) for c in version.capabilities
    ):
        problems["capabilities"].append("must be a list of names such as NET_ADMIN")
    found = {name: msgs for name, msgs in problems.items() if msgs}
    if found:
        raise ValidationError(found)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown_keys(item: dict, allowed: set[str], where: str, out: list[str]) -> None:
    for key in sorted(set(item) - allowed):
        out.append(f"{where}: unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")


def _check_roles(roles: Any, out: list[str]) -> list[str]:
    if not isinstance(roles, list) or not roles:
        out.append("must be a non-empty list of role definitions")
        return []
    names: list[str] = []
    for n, role in enumerate(roles):
        where = f"roles[{n}]"
        if not isinstance(role, dict):
            out.append(f"{where}: must be an object")
            continue
        _unknown_keys(role, ROLE_KEYS, where, out)
        settings = role.get("data_settings", {})
        if not isinstance(settings, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in settings.items()
        ):
            out.append(f"{where}.data_settings: must map setting names to value templates")
        name = role.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            out.append(f"{where}.name: must be a lower-case identifier, got {name!r}")
            continue
        where = f"role {name}"
        if name in names:
            out.append(f"{where}: defined twice")
        names.append(name)
        if not _is_int(role.get("max")):
            out.append(f"{where}.max: required integer count, got {role.get('max')!r}")
            continue
        for prop in ROLE_PROPERTIES:
            spec = role if prop == "count" else role.get(prop, {})
            if prop != "count":
                if not isinstance(spec, dict):
                    out.append(f"{where}.{prop}: must be an object with min/default/max")
                    continue
                _unknown_keys(spec, RESOURCE_KEYS, f"{where}.{prop}", out)
            bad = [k for k in RESOURCE_KEYS if k in spec and not _is_int(spec[k])]
            if bad:
                out.append(f"{where}.{prop}: {', '.join(sorted(bad))} must be integers")
                continue
            b = role_resource(role, prop)
            label = "count" if prop == "count" else prop
            floor = 0 if prop == "count" else RESOURCE_FLOORS[prop]
            if b["min"] < floor:
                out.append(f"{where}.{label}: min must be at least {floor}, got {b['min']}")
            if not b["min"] <= b["default"] <= b["max"]:
                out.append(
                    f"{where}.{label}: needs min <= default <= max, "
                    f"got {b['min']} <= {b['default']} <= {b['max']}"
                )
        if role["max"] < 1:
            out.append(f"{where}.max: must be at least 1")
        for key in ("image", "description", "user"):
            if key in role and not isinstance(role[key], str):
                out.append(f"{where}.{key}: must be a string")
        if "command" in role and not _is_argv(role["command"]):
            out.append(f"{where}.command: must be a non-empty list of strings")
        if "environment" in role and not _is_env(role["environment"]):
            out.append(f"{where}.environment: must map NAME to string values")
    return names


def _check_options(version: ProductVersion, role_names: list[str], out: list[str]) -> None:
    schema = version.options_schema
    if not isinstance(schema, dict):
        out.append("must be an object with sections required/optional/advanced")
        return
    for section in sorted(set(schema) - set(SECTIONS)):
        out.append(f"unknown section {section!r} (allowed: {', '.join(SECTIONS)})")
    seen: set[str] = set()
    roles = {r["name"]: r for r in version.roles}
    for section in SECTIONS:
        options = schema.get(section, {})
        if not isinstance(options, dict):
            out.append(f"{section}: must map option names to definitions")
            continue
        for name, definition in options.items():
            where = f"{section}.{name}"
            if not NAME.fullmatch(name) or name in LAUNCH_KEYS:
                out.append(f"{where}: option names are lower-case identifiers, not a launch key")
            if name in seen:
                out.append(f"{where}: defined in more than one section")
            seen.add(name)
            if not isinstance(definition, dict):
                out.append(f"{where}: must be an object")
                continue
            _check_option(definition, where, roles, out)


def _check_option(d: dict, where: str, roles: dict[str, dict], out: list[str]) -> None:
    _unknown_keys(d, OPTION_KEYS, where, out)
    kind = d.get("type")
    if kind not in OPTION_TYPES:
        out.append(f"{where}.type: must be one of {', '.join(OPTION_TYPES)}, got {kind!r}")
        return
    if not isinstance(d.get("description"), str) or not d["description"].strip():
        out.append(f"{where}.description: required")
    if kind == "int":
        for key in ("min", "max"):
            if key in d and not _is_int(d[key]):
                out.append(f"{where}.{key}: must be an integer")
                return
        if "min" in d and "max" in d and d["min"] > d["max"]:
            out.append(f"{where}: min {d['min']} is greater than max {d['max']}")
            return
    if kind == "choice" and (not isinstance(d.get("choices"), list) or not d["choices"]):
        out.append(f"{where}.choices: must be a non-empty list")
        return
    if kind == "str" and "pattern" in d:
        try:
            re.compile(d["pattern"])
        except (re.error, TypeError) as exc:
            out.append(f"{where}.pattern: not a valid regular expression ({exc})")
            return
    if "default" not in d:
        out.append(f"{where}.default: required")
        return
    default, problem = check_value(d, d["default"])
    if problem:
        out.append(f"{where}.default: {problem}")
        return
    if "sets" not in d:
        if "roles" in d:
            out.append(f"{where}.roles: only options that set a role property name roles")
        return
    if d["sets"] not in ROLE_PROPERTIES or kind != "int":
        out.append(
            f"{where}.sets: an int option may set one of {', '.join(ROLE_PROPERTIES)}, "
            f"got {d['sets']!r} on a {kind} option"
        )
        return
    targets = d.get("roles", list(roles))
    if not isinstance(targets, list) or not targets:
        out.append(f"{where}.roles: must be a non-empty list of role names")
        return
    for name in targets:
        if name not in roles:
            out.append(f"{where}.roles: no role named {name!r} (roles: {', '.join(roles)})")
            continue
        b = role_resource(roles[name], d["sets"])
        if not b["min"] <= default <= b["max"]:
            out.append(
                f"{where}.default: {default} is outside role {name}'s {d['sets']} "
                f"range {b['min']}..{b['max']}"
            )


def _check_ports(ports: Any, role_names: list[str], out: list[str]) -> None:
    if not isinstance(ports, list):
        out.append("must be a list of {role, port, name}")
        return
    for n, port in enumerate(ports):
        where = f"ports[{n}]"
        if not isinstance(port, dict):
            out.append(f"{where}: must be an object")
            continue
        _unknown_keys(port, PORT_KEYS, where, out)
        if port.get("role") not in role_names:
            out.append(f"{where}.role: no role named {port.get('role')!r}")
        if not _is_int(port.get("port")) or not 1 <= port["port"] <= 65535:
            out.append(f"{where}.port: must be an integer 1..65535, got {port.get('port')!r}")
        if not isinstance(port.get("name"), str) or not port["name"]:
            out.append(f"{where}.name: required")
        if port.get("protocol", "tcp") not in ("tcp", "udp"):
            out.append(f"{where}.protocol: must be tcp or udp")
        if not isinstance(port.get("ui", False), bool):
            out.append(f"{where}.ui: must be true or false")
        connect = port.get("connect", [])
        if not isinstance(connect, list) or not all(isinstance(t, str) and t for t in connect):
            out.append(f"{where}.connect: must be a list of connection string templates")


def _check_environment(version: ProductVersion, out: list[str]) -> None:
    if not _is_env(version.environment):
        out.append("must map NAME to string values")
        return
    known = known_placeholders(version)
    texts = list(version.environment.values())
    for role in version.roles if isinstance(version.roles, list) else []:
        if isinstance(role, dict):
            texts += list((role.get("environment") or {}).values())
            texts += list(role.get("command") or [])
    for text in texts:
        for name in sorted(placeholders_in(str(text)) - known):
            out.append(f"unknown placeholder {{{{{name}}}}} in {text!r}")


def _check_configure(version: ProductVersion, role_names: list[str], out: list[str]) -> None:
    steps = version.configure
    if not isinstance(steps, list):
        out.append("must be a list of {role, command} steps")
        return
    known = known_placeholders(version)
    for n, step in enumerate(steps):
        where = f"configure[{n}]"
        if not isinstance(step, dict):
            out.append(f"{where}: must be an object")
            continue
        _unknown_keys(step, STEP_KEYS, where, out)
        if "role" in step and step["role"] not in role_names:
            out.append(f"{where}.role: no role named {step['role']!r}")
        if not _is_argv(step.get("command")):
            out.append(f"{where}.command: must be a non-empty list of strings")
            continue
        if "once" in step and not isinstance(step["once"], bool):
            out.append(f"{where}.once: must be true or false")
        if "timeout" in step and (not _is_int(step["timeout"]) or step["timeout"] < 1):
            out.append(f"{where}.timeout: must be a positive number of seconds")
        for part in step["command"]:
            for name in sorted(placeholders_in(part) - known):
                out.append(f"{where}.command: unknown placeholder {{{{{name}}}}}")


def _is_argv(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(p, str) for p in value)


def _is_env(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and ENV_NAME.fullmatch(k) and isinstance(v, str)
        for k, v in value.items()
    )
