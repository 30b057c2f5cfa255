"""Launch options of a product version: the schema, its validation and the resolved cluster spec.

Option names follow the CESGA Big Data PaaS where they exist: ``size`` (instances of the
scalable role), ``disks`` (per instance), ``cpu`` (cores per instance), ``mem`` (MB per
instance). Everything a user may pass is declared by the version; anything else is rejected by
name, except Platter's own launch-level keys (``LAUNCH_KEYS``), which are not product options.

The fields below are parsed once into typed objects by ``apps.catalog.spec``
(``ProductVersion.definition``); a launch request (launch keys and options) is parsed by
``apps.clusters.launch_requests.parse_launch``, whichever front door it came through.

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
  A bool option may set ``count`` or ``disks``: true is 1, false 0 (Spark's notebook instance).
  Options without ``sets`` are product parameters, available to templates by name.

``ports`` -- endpoints to publish: ``[{"role": "master", "port": 9870, "name": "HDFS web UI",
"protocol": "tcp", "scheme": "http", "ui": true}]`` (``protocol`` defaults to tcp, ``scheme``
optional; ``ui``: a web UI the portal serves to the cluster's owner through its proxy, apps/proxy;
``prefixed``: that UI serves itself under the portal's path of it, as JupyterLab's base_url;
``token``: that UI requires the cluster's UI token, which only the proxy sends upstream).
``allows``: what a source that reaches the port directly (one the owner allows) can do with
it, one line shown on the version's page, e.g. "submits applications; no authentication".
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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticValidationError

from .definition import validate_definition
from .spec import (
    DEFAULT_STR_MAX_LENGTH,
    DISK_KINDS,
    LAUNCH_KEYS,
    OPTION_TYPES,
    RESOURCE_FLOORS,
    RESOURCE_UNITS,
    ROLE_PROPERTIES,
    SECTIONS,
    USER_TEXT,
    USER_TEXT_RULE,
    Option,
    ProductDefinition,
    definition_of,
    user_text_problem,
)
from .spec_errors import from_pydantic

if TYPE_CHECKING:
    from .models import ProductVersion

__all__ = [
    "DEFAULT_STR_MAX_LENGTH",
    "DISK_KINDS",
    "LAUNCH_KEYS",
    "OPTION_TYPES",
    "RESOURCE_FLOORS",
    "RESOURCE_UNITS",
    "ROLE_PROPERTIES",
    "SECTIONS",
    "USER_TEXT",
    "USER_TEXT_RULE",
    "ClusterSpec",
    "InstanceSpec",
    "OptionsError",
    "describe",
    "option_definitions",
    "resolve",
    "role_resource",
    "targeted_roles",
    "user_text_problem",
    "validate_definition",
]


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


# ---------------------------------------------------------------- plain-dict views
# For code and tests that read the JSON shapes; the launch path uses the typed definition.


def option_definitions(version: ProductVersion | ProductDefinition) -> dict[str, dict]:
    """Option name -> its definition as written, plus its ``section``, in section order."""
    definition = definition_of(version)
    return {
        name: {**option.model_dump(exclude_unset=True), "section": section}
        for name, option in definition.options.items()
        for section in [definition.option_sections[name]]
    }


def role_resource(role: dict, prop: str) -> dict[str, int]:
    """{"min", "default", "max"} of a role's count or per-instance resource (a role as
    written in the JSON)."""
    if prop == "count":
        return {"min": role.get("min", 0), "default": role.get("default", 1), "max": role["max"]}
    spec = role.get(prop) or {}
    floor = RESOURCE_FLOORS[prop]
    default = spec.get("default", floor)
    return {"min": spec.get("min", floor), "default": default, "max": spec.get("max", default)}


def targeted_roles(version: ProductVersion | ProductDefinition, definition: dict) -> list[dict]:
    """The roles (as written) an option definition (a dict) reaches."""
    wanted = definition.get("roles")
    return [
        r.model_dump(exclude_unset=True)
        for r in definition_of(version).roles
        if wanted is None or r.name in wanted
    ]


def check_value(definition: dict | Option, value: Any) -> tuple[Any, str | None]:
    """Coerce ``value`` to the option's type; return (value, None) or (None, problem). A
    definition (a dict as written) that is itself broken is a problem too, named by path."""
    if isinstance(definition, Option):
        return definition.check(value)
    try:
        option = Option.model_validate({k: v for k, v in definition.items() if k != "section"})
    except PydanticValidationError as exc:
        problems = from_pydantic("option", Option, exc)
        return None, "the option's definition is broken: " + "; ".join(map(str, problems))
    return option.check(value)


# ---------------------------------------------------------------- resolve and describe


def resolve(version: ProductVersion | ProductDefinition, options: dict) -> ClusterSpec:
    """The instances a launch of ``version`` with ``options`` needs, or OptionsError listing
    every bad field. A ``None`` value means "use the default"."""
    if not isinstance(options, dict):
        raise OptionsError({"options": f"must be an object, got {type(options).__name__}"})
    definition = definition_of(version)
    errors: dict[str, str] = {}

    known = ", ".join([*definition.options, *sorted(LAUNCH_KEYS)])
    for name in options:
        if name not in definition.options and name not in LAUNCH_KEYS:
            errors[str(name)] = f"unknown option {name!r} (known: {known})"

    disk_kind = definition.disk_kind
    if options.get("disk_kind") is not None:
        disk_kind = options["disk_kind"]
        if disk_kind not in DISK_KINDS:
            errors["disk_kind"] = f"must be one of {', '.join(DISK_KINDS)}, got {disk_kind!r}"

    values: dict[str, Any] = {}
    for name, option in definition.options.items():
        given = options.get(name)
        value, problem = option.check(option.default if given is None else given)
        if problem:
            errors[name] = problem
            continue
        values[name] = value
        if option.sets:
            problem = _role_limits_problem(definition, option, value)
            if problem:
                errors[name] = problem

    if errors:
        raise OptionsError(errors)

    instances: list[InstanceSpec] = []
    for role in definition.roles:
        props = {prop: role.bounds(prop).default for prop in ROLE_PROPERTIES}
        for name, option in definition.options.items():
            if option.sets and (option.roles is None or role.name in option.roles):
                props[option.sets] = int(values[name])  # a bool's true is 1
        image = role.image or definition.image
        instances.extend(
            InstanceSpec(
                role=role.name,
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


def _role_limits_problem(definition: ProductDefinition, option: Option, value: int) -> str | None:
    prop = option.sets
    assert prop is not None
    unit = RESOURCE_UNITS[prop]
    problems = []
    for role in definition.targeted_roles(option):
        bounds = role.bounds(prop)
        if prop == "count":
            where, allow, need = f"role {role.name}", "allows", "needs"
        else:
            where, allow, need = f"{role.name} instances", "allow", "need"
        value = int(value)  # a bool's true is 1
        if value > bounds.max:
            problems.append(f"{where} {allow} at most {bounds.max} {unit}, got {value}")
        elif value < bounds.min:
            problems.append(f"{where} {need} at least {bounds.min} {unit}, got {value}")
    return "; ".join(problems) or None


def describe(version: ProductVersion | ProductDefinition) -> dict:
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
