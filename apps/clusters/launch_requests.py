"""One launch request, parsed the same way for every front door: the web launch form, the REST
API (POST /api/v1/products/<p>/<v> and POST /api/v1/clusters) and CESGA's launch call.

    request = parse_launch(version, data, owner)   # LaunchError, or a LaunchRequest
    services.launch(owner, version, request.name or <a default name>, request.options,
                    request.lease_hours, request.reuse_data_from)

``data`` holds the launch keys (``name``, ``disk_kind``, ``lease`` in hours,
``reuse_data_from``: a destroyed cluster's id, ``idle_minutes``, ``allowed_sources``: the
sources that reach its ports, perimeter.py) next to the product's options (the version's
``options_schema``). Values may be JSON values or the strings a form posts ("3", "true");
a missing, ``None`` or empty value means the default. Every bad field is reported at once:
``LaunchError.errors`` maps the field to a message naming the problem."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from apps.catalog.models import ProductVersion
from apps.catalog.options import LAUNCH_KEYS, ClusterSpec, OptionsError, resolve

from .idle import IdleLimitError, check_limit
from .models import Cluster
from .perimeter import SourceError, parse_sources

NAME = re.compile(r"[-a-zA-Z0-9_]{1,63}")
NAME_RULE = "letters, digits, dashes and underscores, at most 63"
# A lease shorter than this would end before the cluster has started.
LEASE_MIN_HOURS = 0.01
LEASE_MAX_HOURS = 10**6
MAX_ID = 2**63 - 1


class LaunchError(OptionsError):
    """A launch request with bad fields; ``errors`` maps each field to its problem. An
    OptionsError, so the API answers it as one (400, ``fields``)."""


@dataclass(frozen=True)
class LaunchRequest:
    version: ProductVersion
    name: str | None  # None: not given (the API names the cluster, the form requires one)
    # The product options given, checked and read as their types, plus disk_kind when given:
    # what the cluster records (defaults are filled in by `spec`).
    options: dict[str, Any]
    spec: ClusterSpec  # the instances it needs, every option resolved
    lease_hours: float | None
    reuse_data_from: Cluster | None
    disk_kind: str
    idle_minutes: int | None = None  # stop after this long unused (idle.py); None: none of its own
    # The owner's allow-list (perimeter.py), normalised; empty: members, portal and SSH only.
    allowed_sources: tuple[str, ...] = ()


def parse_launch(version: ProductVersion, data: dict[str, Any], owner: Any) -> LaunchRequest:
    """Check a launch of ``version`` by ``owner`` (a user) asked with ``data``; raise
    LaunchError naming every bad field."""
    if not isinstance(data, dict):
        raise LaunchError({"options": f"must be a JSON object, got {type(data).__name__}"})
    given = {str(k): v for k, v in data.items() if not _empty(v)}
    errors: dict[str, str] = {}

    name = given.get("name")
    if name is not None and not (isinstance(name, str) and NAME.fullmatch(name)):
        errors["name"] = f"must be {NAME_RULE}; got {_brief(name)}"
    lease, problem = _lease(given.get("lease"))
    if problem:
        errors["lease"] = problem
    reuse, problem = _reuse(given.get("reuse_data_from"), version, owner)
    if problem:
        errors["reuse_data_from"] = problem
    idle_minutes, problem = _idle_minutes(given.get("idle_minutes"))
    if problem:
        errors["idle_minutes"] = problem
    sources, problem = _allowed_sources(given.get("allowed_sources"))
    if problem:
        errors["allowed_sources"] = problem

    options = {k: v for k, v in given.items() if k not in LAUNCH_KEYS - {"disk_kind"}}
    spec = None
    try:
        spec = resolve(version, options)
    except OptionsError as exc:
        errors.update(exc.errors)
    if errors or spec is None:
        raise LaunchError(errors)
    chosen = {k: spec.options[k] for k in options if k in spec.options}
    if "disk_kind" in options:
        chosen["disk_kind"] = spec.disk_kind
    return LaunchRequest(
        version=version,
        name=name,
        options=chosen,
        spec=spec,
        lease_hours=lease,
        reuse_data_from=reuse,
        disk_kind=spec.disk_kind,
        idle_minutes=idle_minutes,
        allowed_sources=tuple(sources),
    )


def _allowed_sources(value: Any) -> tuple[list[str], str | None]:
    """IPv4 addresses and CIDRs: a list, or one string of them split on commas and spaces (as
    the form posts it); the message names the first bad entry."""
    if value is None:
        return [], None
    if not isinstance(value, (list, str)):
        return [], f"must be a list of IPv4 addresses or CIDRs; got {_brief(value)}"
    try:
        return parse_sources(value), None
    except SourceError as error:
        return [], str(error)


def _idle_minutes(value: Any) -> tuple[int | None, str | None]:
    """Whole minutes (a form posts "45"), within idle.py's range; None when not given."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    try:
        return check_limit(value), None
    except IdleLimitError as error:
        return None, str(error).removeprefix("idle limit ")


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _brief(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _lease(value: Any) -> tuple[float | None, str | None]:
    if value is None:
        return None, None
    hours = _number(value)
    cap = min(LEASE_MAX_HOURS, settings.SCHEDULER_MAX_LEASE_HOURS or LEASE_MAX_HOURS)
    if hours is None or not LEASE_MIN_HOURS <= hours <= cap:
        return (
            None,
            f"must be a number of hours from {LEASE_MIN_HOURS} to {cap}; got {_brief(value)}",
        )
    return hours, None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and re.fullmatch(
        r"\s*[+-]?(\d{1,12}(\.\d{0,12})?|\.\d{1,12})\s*", value
    ):
        value = float(value)
    if isinstance(value, int):
        value = float(value) if abs(value) < 10**15 else math.inf
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _reuse(value: Any, version: ProductVersion, owner: Any) -> tuple[Cluster | None, str | None]:
    """The destroyed cluster of the owner's, of the same product, whose kept data to reuse."""
    if value is None:
        return None, None
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,19}\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        return None, f"must be the id of a destroyed cluster of yours; got {_brief(value)}"
    found = Cluster.objects.filter(owner=owner, id=value).select_related("version").first()
    if found is None:  # someone else's is not named: ids do not tell what others have
        return None, f"you have no cluster {value}"
    if found.state != Cluster.State.DESTROYED:
        return None, f"cluster {found.name} is {found.state}; only a destroyed one's data is kept"
    if found.version.product_id != version.product_id:
        return None, f"cluster {found.name} ran another product; its data does not fit this one"
    return found, None
