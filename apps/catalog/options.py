"""Launch options of a product version: the schema, its validation and the resolved cluster spec.

Option names follow the CESGA Big Data PaaS where they exist: ``size`` (instances of the
scalable role), ``disks`` (per instance), ``cpu`` (cores per instance), ``mem`` (MB per
instance). Everything a user may pass is declared by the version; anything else is rejected by
name, except Platter's own launch-level keys (``LAUNCH_KEYS``), which are not product options.

JSON shapes of the ProductVersion fields
----------------------------------------
``roles`` -- a list, in start order::

    [{"name": "master", "min": 1, "max": 1, "default": 1,
      "cores": {"default": 1, "max": 4},          # optional "min" (default 1)
      "memory_mb": {"default": 1024, "max": 8192},  # optional "min" (default 64)
      "disks": {"default": 1, "max": 4},           # optional "min" (default 0)
      "image": "spark:3.5.1",                     # optional, else ProductVersion.image
      "command": ["sh", "-c", "..."],             # optional, else the image's own command
      "user": "root",                             # optional, else the image's own user
      "environment": {"ROLE_ONLY": "..."},        # optional, added to ProductVersion.environment
      "data_settings": {"dfs.datanode.data.dir": "{{data_dirs_csv}}"},  # optional: the
                                                  # product settings its disks decide, shown
                                                  # on the cluster page (its data path)
      "description": "..."}]                      # optional

``options_schema`` -- sections, each mapping an option name to its definition::

    {"required": {"size": {"type": "int", "default": 2, "min": 1, "max": 16,
                           "description": "Number of workers",
                           "sets": "count", "roles": ["worker"]}},
     "optional": {"cpu": {"type": "int", "default": 2, "min": 1, "max": 12,
                          "description": "Cores per instance", "sets": "cores"}},
     "advanced": {"replication": {"type": "choice", "choices": [1, 2, 3], "default": 2,
                                  "description": "HDFS replication factor"}}}

  ``type`` is one of int / str / bool / choice; ints take ``min``/``max``, strs may take
  ``max_length`` and ``pattern`` (a full-match regex), choices take ``choices``. ``sets`` ties an
  int option to a role property: ``count`` (instances of the role), ``cores``, ``memory_mb`` or
  ``disks`` (per instance), for the roles listed in ``roles`` (all roles when omitted). A role's
  own ``max`` still caps such an option; roles the option does not reach keep their defaults.
  Options without ``sets`` are product parameters, available to templates by name.

``ports`` -- endpoints to publish: ``[{"role": "master", "port": 9870, "name": "HDFS web UI",
"protocol": "tcp", "scheme": "http", "ui": true}]`` (``protocol`` defaults to tcp, ``scheme``
optional; ``ui``: a web UI the portal serves to the cluster's owner through its proxy, apps/proxy).
``connect``: connection strings shown to users, e.g. ``["spark://{{address}}:7077"]``; their
placeholders (addresses, credentials) are listed in ``apps.clusters.connection``.

``environment`` -- ``{"NAME": "value"}`` for every container; values may use placeholders.

``configure`` -- post-start steps run in order once every container is up:
``[{"role": "master", "command": ["sh", "-c", "..."], "description": "...", "timeout": 60,
"once": false}]``. A step runs in every instance of ``role`` (every instance when ``role`` is
omitted), or only in the role's first instance with ``"once": true``; ``timeout`` is in seconds
(default 120).

Placeholders (``{{name}}``, in environment values, role commands and configure commands; double
braces so shell ``${VAR}`` stays untouched) are listed in ``apps.catalog.templating``.

Disks of an instance are mounted at ``/data/1`` .. ``/data/N`` inside its container.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import ProductVersion

# Launch-level keys accepted next to the product options; resolve() ignores them except
# disk_kind, which changes every instance and so is validated here.
LAUNCH_KEYS = frozenset({"name", "disk_kind", "lease", "reuse_data_from"})
DISK_KINDS = ("hdd", "ssd", "nvme")
SECTIONS = ("required", "optional", "advanced")
OPTION_TYPES = ("int", "str", "bool", "choice")
# What an int option may set on roles, and the floor of each per-instance resource.
ROLE_PROPERTIES = ("count", "cores", "memory_mb", "disks")
RESOURCE_FLOORS = {"cores": 1, "memory_mb": 64, "disks": 0}
RESOURCE_UNITS = {"count": "instances", "cores": "cores", "memory_mb": "MB", "disks": "disks"}
DEFAULT_STR_MAX_LENGTH = 255

# Text a user chooses (str options, the cluster's name) is substituted into admin-written
# commands, often `sh -c` scripts where a placeholder may sit bare, inside "...", inside '...'
# or inside a string of another language (mongosh's JavaScript). Shell-quoting the value is
# not correct in all of those places: a quoted value put inside "..." still runs $(...), and
# one put inside '...' ends the quote. So such text may only hold characters that are literal
# in every one of them, and may not start with "-" (it would read as an option of the command
# it lands in). A product's own `pattern` can narrow this further, never widen it.
USER_TEXT = re.compile(r"(?!-)[A-Za-z0-9 ._,:=+/@-]*")
USER_TEXT_RULE = "letters, digits, spaces and . _ , : = + / @ - (not first)"


def user_text_problem(value: str) -> str | None:
    """Why ``value`` may not go into a command, or None when it may."""
    if USER_TEXT.fullmatch(value):
        return None
    return f"may hold only {USER_TEXT_RULE}, no shell characters; got {value!r}"


@dataclass(frozen=True)
class InstanceSpec:
    role: str
    index: int  # 0-based within its role
    cores: int
    memory_mb: int
    disks: int
    disk_kind: str
    image: str


@dataclass(frozen=True)
class ClusterSpec:
    instances: list[InstanceSpec]
    # Every product option of the version, as given or defaulted (launch keys excluded).
    options: dict[str, Any] = field(default_factory=dict)
    disk_kind: str = "hdd"

    @property
    def cores(self) -> int:
        return sum(i.cores for i in self.instances)

    @property
    def memory_mb(self) -> int:
        return sum(i.memory_mb for i in self.instances)

    @property
    def disks(self) -> int:
        return sum(i.disks for i in self.instances)

    def count(self, role: str) -> int:
        return sum(1 for i in self.instances if i.role == role)


class OptionsError(ValueError):
    """Bad launch options; ``errors`` maps each bad field to a message naming the problem."""

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{name}: {msg}" for name, msg in self.errors.items()))


# ---------------------------------------------------------------- schema access


def option_definitions(version: ProductVersion) -> dict[str, dict]:
    """Option name -> definition with its ``section``, in section order."""
    schema = version.options_schema or {}
    found: dict[str, dict] = {}
    for section in SECTIONS:
        for name, definition in (schema.get(section) or {}).items():
            found[name] = {**definition, "section": section}
    return found


def role_definitions(version: ProductVersion) -> list[dict]:
    return list(version.roles or [])


def role_resource(role: dict, prop: str) -> dict[str, int]:
    """{"min", "default", "max"} of a role's count or per-instance resource."""
    if prop == "count":
        return {"min": role.get("min", 0), "default": role.get("default", 1), "max": role["max"]}
    spec = role.get(prop) or {}
    floor = RESOURCE_FLOORS[prop]
    default = spec.get("default", floor)
    return {"min": spec.get("min", floor), "default": default, "max": spec.get("max", default)}


def targeted_roles(version: ProductVersion, definition: dict) -> list[dict]:
    wanted = definition.get("roles")
    return [r for r in role_definitions(version) if wanted is None or r["name"] in wanted]


# ---------------------------------------------------------------- one value


def check_value(definition: dict, value: Any) -> tuple[Any, str | None]:
    """Coerce ``value`` to the option's type; return (value, None) or (None, problem)."""
    kind = definition.get("type")
    if kind == "int":
        number = _as_int(value)
        if number is None:
            return None, f"must be an integer, got {_brief(value)}"
        low, high = definition.get("min"), definition.get("max")
        if low is not None and high is not None and not low <= number <= high:
            return None, f"must be between {low} and {high}, got {_brief(number)}"
        if low is not None and number < low:
            return None, f"must be at least {low}, got {_brief(number)}"
        if high is not None and number > high:
            return None, f"must be at most {high}, got {_brief(number)}"
        return number, None
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true", None
        return None, f"must be true or false, got {value!r}"
    if kind == "choice":
        choices = definition.get("choices") or []
        for choice in choices:
            # Form posts send strings; accept "3" for the choice 3, never True for 1.
            same = type(value) is type(choice) and value == choice
            if same or (isinstance(value, str) and value == str(choice)):
                return choice, None
        return None, f"must be one of {', '.join(map(str, choices))}, got {value!r}"
    if kind == "str":
        if not isinstance(value, str):
            return None, f"must be a string, got {value!r}"
        limit = definition.get("max_length", DEFAULT_STR_MAX_LENGTH)
        if len(value) > limit:
            return None, f"must be at most {limit} characters, got {len(value)}"
        problem = user_text_problem(value)
        if problem:
            return None, problem
        pattern = definition.get("pattern")
        if pattern and not re.fullmatch(pattern, value):
            return None, f"must match {pattern}, got {value!r}"
        return value, None
    return None, f"has an unknown type {kind!r} in the product definition"


def _brief(value: Any) -> str:
    """A value as an error message quotes it: a 5,000-digit number is not echoed whole."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    # Up to 18 digits: any option's range, and far below int()'s 4300-digit refusal.
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,18}\s*", value):
        return int(value)
    return None


# ---------------------------------------------------------------- resolve and describe


def resolve(version: ProductVersion, options: dict) -> ClusterSpec:
    """The instances a launch of ``version`` with ``options`` needs, or OptionsError listing
    every bad field. A ``None`` value means "use the default"."""
    if not isinstance(options, dict):
        raise OptionsError({"options": f"must be an object, got {type(options).__name__}"})
    definitions = option_definitions(version)
    errors: dict[str, str] = {}

    known = ", ".join([*definitions, *sorted(LAUNCH_KEYS)])
    for name in options:
        if name not in definitions and name not in LAUNCH_KEYS:
            errors[str(name)] = f"unknown option {name!r} (known: {known})"

    disk_kind = version.disk_kind
    if options.get("disk_kind") is not None:
        disk_kind = options["disk_kind"]
        if disk_kind not in DISK_KINDS:
            errors["disk_kind"] = f"must be one of {', '.join(DISK_KINDS)}, got {disk_kind!r}"

    values: dict[str, Any] = {}
    for name, definition in definitions.items():
        given = options.get(name)
        value, problem = check_value(
            definition, definition.get("default") if given is None else given
        )
        if problem:
            errors[name] = problem
            continue
        values[name] = value
        if definition.get("sets"):
            problem = _role_limits_problem(version, definition, value)
            if problem:
                errors[name] = problem

    if errors:
        raise OptionsError(errors)

    instances: list[InstanceSpec] = []
    for role in role_definitions(version):
        props = {prop: role_resource(role, prop)["default"] for prop in ROLE_PROPERTIES}
        for name, definition in definitions.items():
            reached = {r["name"] for r in targeted_roles(version, definition)}
            if definition.get("sets") and role["name"] in reached:
                props[definition["sets"]] = values[name]
        image = role.get("image") or version.image
        instances.extend(
            InstanceSpec(
                role=role["name"],
                index=index,
                cores=props["cores"],
                memory_mb=props["memory_mb"],
                disks=props["disks"],
                disk_kind=disk_kind,
                image=image,
            )
            for index in range(props["count"])
        )
    return ClusterSpec(instances=instances, options=values, disk_kind=disk_kind)


def _role_limits_problem(version: ProductVersion, definition: dict, value: int) -> str | None:
    prop = definition["sets"]
    unit = RESOURCE_UNITS[prop]
    problems = []
    for role in targeted_roles(version, definition):
        bounds = role_resource(role, prop)
        if prop == "count":
            where, allow, need = f"role {role['name']}", "allows", "needs"
        else:
            where, allow, need = f"{role['name']} instances", "allow", "need"
        if value > bounds["max"]:
            problems.append(f"{where} {allow} at most {bounds['max']} {unit}, got {value}")
        elif value < bounds["min"]:
            problems.append(f"{where} {need} at least {bounds['min']} {unit}, got {value}")
    return "; ".join(problems) or None


def describe(version: ProductVersion) -> dict:
    """The CESGA-style view for UIs and the API: each section maps option name -> default,
    ``descriptions`` maps name -> text, and ``fields`` carries the full definitions (type,
    bounds, choices, section) so a form can be built from it."""
    described: dict[str, Any] = {section: {} for section in SECTIONS}
    described["descriptions"] = {}
    described["fields"] = {}
    for name, definition in option_definitions(version).items():
        described[definition["section"]][name] = definition.get("default")
        described["descriptions"][name] = definition.get("description", "")
        described["fields"][name] = dict(definition)
    described["launch_keys"] = sorted(LAUNCH_KEYS)
    return described


def validate_definition(version: ProductVersion) -> None:
    """Raise django ValidationError (keyed by model field) when the version's roles, options
    schema, ports, environment or configure steps are broken."""
    from .definition import validate_definition as validate

    validate(version)
