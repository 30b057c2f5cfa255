"""A product version's definition as typed objects, parsed once.

``parse_definition(fields)`` takes the JSON fields of a ProductVersion (``image``, ``roles``,
``options_schema``, ``disk_kind``, ``ports``, ``environment``, ``configure``,
``capabilities``; shapes documented in apps/catalog/options.py) and returns a
``ProductDefinition``, or raises one ``DefinitionError`` listing every problem, each named by
its path: ``roles[1].cores: needs min <= default <= max, got 1 <= 8 <= 4``,
``options_schema.optional.cpu.default: must be between 1 and 12, got 20``.

Parsing goes in two passes: pydantic checks the shape of each field on its own (types,
unknown keys, what is required), then plain code checks what spans fields (ranges against
defaults, role names used by options, ports and steps, placeholders). The second pass runs on
whatever fields parsed, so an admin sees every problem at once.

This module imports nothing else of the catalog but its errors (spec_errors.py) and the disk
path rule (disk_paths.py), and of other apps only the plugins' names (apps.products): options.py,
templating.py and models.py build on it (no import cycle)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from apps.products import registry as plugins

from . import disk_paths
from .spec_errors import DefinitionError, Path, Problem, brief, from_pydantic

# Launch-level keys a launch request may carry next to the product options.
LAUNCH_KEYS = frozenset(
    {"name", "disk_kind", "lease", "reuse_data_from", "idle_minutes", "allowed_sources"}
)
DISK_KINDS = ("hdd", "ssd", "nvme")
SECTIONS = ("required", "optional", "advanced")
OPTION_TYPES = ("int", "str", "bool", "choice")
# What an int option may set on roles, and the floor of each per-instance resource.
ROLE_PROPERTIES = ("count", "cores", "memory_mb", "disks")
RESOURCE_FLOORS = {"cores": 1, "memory_mb": 64, "disks": 0}
# A bool option may set these role properties: true is 1 (one instance, one disk), false 0
# (Spark's "notebook": its notebook instance).
BOOL_SETS = ("count", "disks")
RESOURCE_UNITS = {"count": "instances", "cores": "cores", "memory_mb": "MB", "disks": "disks"}
DEFAULT_STR_MAX_LENGTH = 255
DEFAULT_CONFIGURE_TIMEOUT = 120
# The ProductVersion fields a definition is made of, in the order problems are reported.
DEFINITION_FIELDS = (
    "image",
    "disk_kind",
    "roles",
    "options_schema",
    "ports",
    "environment",
    "configure",
    "capabilities",
    "plugin",
)

NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")
# Docker accepts any name without "="; some images read names such as CORE-SITE.XML_fs.x.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
CAPABILITY = re.compile(r"[A-Z_]+")

# Placeholders of environment values and commands (listed in apps.catalog.templating).
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
INSTANCE_NAMES = (
    "cluster",
    "hostname",
    "role",
    "index",
    "cores",
    "memory_mb",
    "disks",
    "data_dirs",
    "data_dirs_csv",
)
CLUSTER_NAMES = ("members", "members_csv")
ROLE_SUFFIXES = ("_hosts", "_hosts_csv", "_host", "_count")

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


def placeholders_in(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


# ---------------------------------------------------------------- field types


def _problem(message: str) -> PydanticCustomError:
    # The message goes through the context: a template would read "{{x}}" as its own syntax.
    return PydanticCustomError("definition", "{problem}", {"problem": message})


def _matching(pattern: re.Pattern, what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise _problem(f"must be {what}, got {value!r}")
        return value

    return AfterValidator(check)


Name = Annotated[str, _matching(NAME, "a lower-case identifier")]
EnvName = Annotated[str, _matching(ENV_NAME, "an environment variable name")]
Capability = Annotated[str, _matching(CAPABILITY, "a capability name such as NET_ADMIN")]
Text = Annotated[str, Field(min_length=1)]
Argv = Annotated[list[str], Field(min_length=1)]


class Strict(BaseModel):
    """JSON as written: no coercion ("2" is not 2, 1 is not true), no unknown keys."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Bounds(NamedTuple):
    min: int
    default: int
    max: int


class Resource(Strict):
    """A per-instance resource range; omitted values fall back to the floor and the default."""

    min: int | None = None
    default: int | None = None
    max: int | None = None

    def bounds(self, floor: int) -> Bounds:
        default = floor if self.default is None else self.default
        return Bounds(
            floor if self.min is None else self.min,
            default,
            default if self.max is None else self.max,
        )


class Role(Strict):
    name: Name
    min: int = 0
    max: int
    default: int = 1
    cores: Resource = Resource()
    memory_mb: Resource = Resource()
    disks: Resource = Resource()
    image: str | None = None  # else the version's image
    command: Argv | None = None  # else the image's own command
    user: str | None = None  # else the image's own user
    environment: dict[EnvName, str] = {}
    # The product settings its disks decide, shown on the cluster page (its data path).
    data_settings: dict[Text, Text] = {}
    # Where its instances see their disks, in order (disk_paths.py); empty: /data/1 .. /data/N.
    disk_paths: list[str] = []
    description: str = ""

    def disk_destinations(self, count: int) -> list[str]:
        """The container paths of an instance of this role with ``count`` disks."""
        return disk_paths.destinations(self.disk_paths, count)

    def bounds(self, prop: str) -> Bounds:
        """The count's or a per-instance resource's range."""
        if prop == "count":
            return Bounds(self.min, self.default, self.max)
        resource: Resource = getattr(self, prop)
        return resource.bounds(RESOURCE_FLOORS[prop])


Scalar = int | float | str | bool


class Option(Strict):
    type: Literal["int", "str", "bool", "choice"]
    description: Text
    default: Scalar
    min: int | None = None  # int
    max: int | None = None  # int
    choices: list[Scalar] | None = None  # choice
    max_length: Annotated[int, Field(ge=1)] | None = None  # str
    pattern: str | None = None  # str, a full-match regular expression
    sets: Literal["count", "cores", "memory_mb", "disks"] | None = None  # int; bool: BOOL_SETS
    roles: list[str] | None = None  # with sets; all roles when omitted

    def check(self, value: Any) -> tuple[Any, str | None]:
        """Coerce ``value`` to the option's type: (value, None), or (None, the problem).
        Form posts send strings, so "3" is read as 3 and "true" as True here."""
        return check_value(self, value)


class OptionsSchema(Strict):
    required: dict[str, Option] = {}
    optional: dict[str, Option] = {}
    advanced: dict[str, Option] = {}

    def sections(self) -> list[tuple[str, dict[str, Option]]]:
        return [(section, getattr(self, section)) for section in SECTIONS]


ALLOWS_MAX_LENGTH = 240


def _one_line(value: str) -> str:
    if not value.strip() or value.splitlines() != [value] or len(value) > ALLOWS_MAX_LENGTH:
        raise _problem(
            f"must say in one line of at most {ALLOWS_MAX_LENGTH} characters what a source "
            f"that reaches the port can do, got {brief(value)}"
        )
    return value


class Port(Strict):
    role: str
    port: Annotated[int, Field(ge=1, le=65535)]
    name: Text
    protocol: Literal["tcp", "udp"] = "tcp"
    scheme: str | None = None
    ui: bool = False  # a web UI the portal serves to the owner through apps/proxy
    # The UI serves itself under the portal's path of it (Jupyter's base_url): the proxy
    # forwards the whole path, not the part after that prefix.
    prefixed: bool = False
    # The UI requires the cluster's UI token (JupyterLab's): its instances are given it
    # (PLATTER_UI_TOKEN) and the proxy adds it to every request upstream, "Authorization:
    # token <t>"; a UI port only.
    token: bool = False
    connect: list[Text] = []  # connection string templates (apps.clusters.connection)
    # What a source that reaches the port directly (one the owner allows) can do with it,
    # in words, shown on the version's page: "submits applications, no authentication".
    # Optional so definitions saved before it still read; the shipped catalog has one each.
    allows: Annotated[str, AfterValidator(_one_line)] | None = None


class ConfigureStep(Strict):
    command: Argv
    role: str | None = None  # every instance when omitted
    description: str = ""
    timeout: Annotated[int, Field(ge=1)] = DEFAULT_CONFIGURE_TIMEOUT
    once: bool = False  # only the first instance of the role


SECTION_TYPES: dict[str, Any] = {
    "image": str,
    "disk_kind": Literal["hdd", "ssd", "nvme"],
    "roles": list[Role],
    "options_schema": OptionsSchema,
    "ports": list[Port],
    "environment": dict[EnvName, str],
    "configure": list[ConfigureStep],
    "capabilities": list[Capability],
    # The product plugin (apps/products) that resizes it, runs its jobs...; "" the generic one.
    "plugin": Annotated[str, Field(max_length=32)],
}
ADAPTERS = {name: TypeAdapter(kind) for name, kind in SECTION_TYPES.items()}


@dataclass(frozen=True)
class ProductDefinition:
    """A parsed, checked definition. Build it with parse_definition()."""

    image: str
    disk_kind: str
    roles: list[Role]
    options_schema: OptionsSchema
    ports: list[Port] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    configure: list[ConfigureStep] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    plugin: str = ""

    @cached_property
    def options(self) -> dict[str, Option]:
        """Every option by name, in section order."""
        return {n: o for _, options in self.options_schema.sections() for n, o in options.items()}

    @cached_property
    def option_sections(self) -> dict[str, str]:
        return {n: s for s, options in self.options_schema.sections() for n in options}

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)

    def disk_destinations(self, role_name: str, count: int) -> list[str]:
        """Where an instance of ``role_name`` sees its ``count`` disks (/data/1 .. by default)."""
        role = self.role(role_name)
        return role.disk_destinations(count) if role else disk_paths.default_paths(count)

    def targeted_roles(self, option: Option) -> list[Role]:
        """The roles an option with ``sets`` reaches (all of them when it names none)."""
        return [r for r in self.roles if option.roles is None or r.name in option.roles]

    def known_placeholders(self) -> set[str]:
        return _known_placeholders([r.name for r in self.roles], self.options)


def definition_of(source: Any) -> ProductDefinition:
    """The definition of a ProductVersion (its cached ``definition``), or ``source`` itself."""
    if isinstance(source, ProductDefinition):
        return source
    return source.definition


def _known_placeholders(role_names: list[str], option_names: Any) -> set[str]:
    names = {*INSTANCE_NAMES, *CLUSTER_NAMES, *option_names}
    names.update(role + suffix for role in role_names for suffix in ROLE_SUFFIXES)
    return names


# ---------------------------------------------------------------- one option value


def check_value(option: Option, value: Any) -> tuple[Any, str | None]:
    """Coerce ``value`` to ``option``'s type; return (value, None) or (None, problem)."""
    if option.type == "int":
        number = _as_int(value)
        if number is None:
            return None, f"must be an integer, got {brief(value)}"
        low, high = option.min, option.max
        if low is not None and high is not None and not low <= number <= high:
            return None, f"must be between {low} and {high}, got {brief(number)}"
        if low is not None and number < low:
            return None, f"must be at least {low}, got {brief(number)}"
        if high is not None and number > high:
            return None, f"must be at most {high}, got {brief(number)}"
        return number, None
    if option.type == "bool":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true", None
        return None, f"must be true or false, got {brief(value)}"
    if option.type == "choice":
        choices = option.choices or []
        for choice in choices:
            # Form posts send strings; accept "3" for the choice 3, never True for 1.
            same = type(value) is type(choice) and value == choice
            if same or (isinstance(value, str) and value == str(choice)):
                return choice, None
        return None, f"must be one of {', '.join(map(str, choices))}, got {brief(value)}"
    if not isinstance(value, str):
        return None, f"must be a string, got {brief(value)}"
    limit = option.max_length or DEFAULT_STR_MAX_LENGTH
    if len(value) > limit:
        return None, f"must be at most {limit} characters, got {len(value)}"
    problem = user_text_problem(value)
    if problem:
        return None, problem
    if option.pattern and not re.fullmatch(option.pattern, value):
        return None, f"must match {option.pattern}, got {value!r}"
    return value, None


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


# ---------------------------------------------------------------- parse


def parse_definition(fields: dict[str, Any], *, checks: bool = True) -> ProductDefinition:
    """Parse and check a definition (a dict of the ProductVersion fields); raise
    DefinitionError naming the path of every problem. With ``checks=False`` only the shapes
    are parsed: how a saved definition is read (it was checked when saved, perhaps by older
    rules), so what spans fields never stops a running cluster."""
    parsed: dict[str, Any] = {}
    problems: list[Problem] = []
    for section in DEFINITION_FIELDS:
        default: Any = {"roles": [], "ports": [], "configure": [], "capabilities": []}.get(
            section, {} if section in ("options_schema", "environment") else ""
        )
        try:
            parsed[section] = ADAPTERS[section].validate_python(fields.get(section, default))
        except PydanticValidationError as exc:
            problems += from_pydantic(section, SECTION_TYPES[section], exc)
    if checks:
        problems += _check(parsed, fields)
    if problems:
        raise DefinitionError(problems)
    return ProductDefinition(**parsed)


def _check(parsed: dict[str, Any], fields: dict[str, Any]) -> list[Problem]:
    """What the shapes alone cannot say; each check runs when the fields it reads parsed."""
    out: list[Problem] = []
    roles: list[Role] | None = parsed.get("roles")
    if roles is not None:
        _check_roles(roles, out)
    role_names = [r.name for r in roles] if roles is not None else None
    schema: OptionsSchema | None = parsed.get("options_schema")
    if schema is not None:
        # Ranges of broken roles would only echo their problem against each option.
        _check_options(schema, None if out else roles, out)
    if role_names is not None:
        # Read as written, so a port with another problem still says its role is unknown.
        for section in ("ports", "configure"):
            items = fields.get(section)
            for n, item in enumerate(items if isinstance(items, list) else []):
                role = item.get("role") if isinstance(item, dict) else None
                if isinstance(role, str) and role not in role_names:
                    out.append(Problem((section, n, "role"), f"no role named {role!r}"))
    for n, port in enumerate(parsed.get("ports") or []):
        if port.token and not port.ui:
            out.append(Problem(("ports", n, "token"), 'only a web UI ("ui": true) takes a token'))
    _check_placeholders(parsed, fields, out)
    plugin = parsed.get("plugin")
    if plugin and plugin not in plugins.names():
        out.append(
            Problem(
                ("plugin",),
                f"no plugin named {plugin!r}: one of {', '.join(plugins.names())} "
                "(or none, for the generic one)",
            )
        )
    return out


def _check_roles(roles: list[Role], out: list[Problem]) -> None:
    if not roles:
        out.append(Problem(("roles",), "must be a non-empty list of role definitions"))
    seen: set[str] = set()
    for n, role in enumerate(roles):
        if role.name in seen:
            out.append(Problem(("roles", n, "name"), f"role {role.name!r} is defined twice"))
        seen.add(role.name)
        if role.max < 1:
            out.append(Problem(("roles", n, "max"), f"must be at least 1, got {role.max}"))
        for prop in ROLE_PROPERTIES:
            where: Path = ("roles", n) if prop == "count" else ("roles", n, prop)
            label = "count " if prop == "count" else ""
            b = role.bounds(prop)
            floor = 0 if prop == "count" else RESOURCE_FLOORS[prop]
            if b.min < floor:
                out.append(Problem(where, f"{label}min must be at least {floor}, got {b.min}"))
            if not b.min <= b.default <= b.max:
                out.append(
                    Problem(
                        where,
                        f"{label}needs min <= default <= max, "
                        f"got {b.min} <= {b.default} <= {b.max}",
                    )
                )
        _check_disk_paths(role, ("roles", n, "disk_paths"), out)


def _check_disk_paths(role: Role, where: Path, out: list[Problem]) -> None:
    for k, problem in disk_paths.list_problems(role.disk_paths):
        out.append(Problem((*where, k), problem))
    most = role.bounds("disks").max
    if role.disk_paths and most > len(role.disk_paths) and not disk_paths.extends(role.disk_paths):
        out.append(
            Problem(
                where,
                f"names {len(role.disk_paths)} paths but an instance may have {most} disks; "
                "name one per disk or number them (/data/0, /data/1, ...)",
            )
        )


def _check_options(schema: OptionsSchema, roles: list[Role] | None, out: list[Problem]) -> None:
    seen: set[str] = set()
    for section, options in schema.sections():
        for name, option in options.items():
            where: Path = ("options_schema", section, name)
            if not NAME.fullmatch(name) or name in LAUNCH_KEYS:
                out.append(
                    Problem(where, "option names are lower-case identifiers, not a launch key")
                )
            if name in seen:
                out.append(Problem(where, "defined in more than one section"))
            seen.add(name)
            _check_option(option, where, roles, out)


def _check_option(o: Option, where: Path, roles: list[Role] | None, out: list[Problem]) -> None:
    if not o.description.strip():
        out.append(Problem((*where, "description"), "required: what users read on the form"))
    if o.type == "int" and o.min is not None and o.max is not None and o.min > o.max:
        out.append(Problem(where, f"min {o.min} is greater than max {o.max}"))
        return
    if o.type == "choice" and not o.choices:
        out.append(Problem((*where, "choices"), "a choice option needs a non-empty list"))
        return
    if o.pattern is not None:
        try:
            re.compile(o.pattern)
        except re.error as exc:
            out.append(Problem((*where, "pattern"), f"not a valid regular expression ({exc})"))
            return
    default, problem = o.check(o.default)
    if problem:
        out.append(Problem((*where, "default"), problem))
        return
    if o.sets is None:
        if o.roles is not None:
            out.append(
                Problem((*where, "roles"), "only options that set a role property name roles")
            )
        return
    if o.type == "bool" and o.sets not in BOOL_SETS:
        allowed = " or ".join(BOOL_SETS)
        out.append(Problem((*where, "sets"), f"a bool option sets only {allowed}, not {o.sets}"))
        return
    if o.type not in ("int", "bool"):
        out.append(
            Problem(
                (*where, "sets"), f"only int and bool options set a role property, not {o.type}"
            )
        )
        return
    if o.roles is not None and not o.roles:
        out.append(Problem((*where, "roles"), "must be a non-empty list of role names"))
        return
    if roles is None:
        return  # the roles did not parse: reported there
    by_name = {r.name: r for r in roles}
    for name in o.roles if o.roles is not None else list(by_name):
        if name not in by_name:
            known = ", ".join(by_name)
            out.append(Problem((*where, "roles"), f"no role named {name!r} (roles: {known})"))
            continue
        b = by_name[name].bounds(o.sets)
        if not b.min <= default <= b.max:
            out.append(
                Problem(
                    (*where, "default"),
                    f"{default} is outside role {name}'s {o.sets} range {b.min}..{b.max}",
                )
            )


def _check_placeholders(parsed: dict[str, Any], fields: dict[str, Any], out: list[Problem]) -> None:
    """Placeholders in environment values, role commands and configure commands must be known.
    Known names come from the roles and options as written, even where those failed to parse,
    so one typo does not hide another."""
    raw_roles = fields.get("roles")
    raw_roles = raw_roles if isinstance(raw_roles, list) else []
    role_names = [r["name"] for r in raw_roles if isinstance(r, dict) and "name" in r]
    schema = fields.get("options_schema")
    schema = schema if isinstance(schema, dict) else {}
    option_names = [n for s in SECTIONS if isinstance(schema.get(s), dict) for n in schema[s]]
    known = _known_placeholders([n for n in role_names if isinstance(n, str)], option_names)

    texts: list[tuple[Path, str]] = []
    texts += [(("environment", k), v) for k, v in (parsed.get("environment") or {}).items()]
    for n, role in enumerate(parsed.get("roles") or []):
        texts += [(("roles", n, "environment", k), v) for k, v in role.environment.items()]
        texts += [(("roles", n, "command", i), v) for i, v in enumerate(role.command or [])]
    for n, step in enumerate(parsed.get("configure") or []):
        texts += [(("configure", n, "command", i), v) for i, v in enumerate(step.command)]
    for path, text in texts:
        for name in sorted(placeholders_in(text) - known):
            out.append(Problem(path, f"unknown placeholder {{{{{name}}}}}"))
