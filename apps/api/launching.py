"""Turning a launch request body into a services.launch call; shared by the Platter API and
the CESGA-compatible surface. The body is the product's options plus the launch-level keys
(name, disk_kind, lease, reuse_data_from, idle_minutes, allowed_sources), all checked by
apps.clusters.launch_requests.parse_launch, as the web form's are."""

from typing import Any

from rest_framework import serializers

from apps.catalog.models import ProductVersion
from apps.catalog.services import launchable_versions
from apps.clusters import names
from apps.clusters.launch_requests import parse_launch
from apps.clusters.models import Cluster
from apps.usage.growth import launch

# Keys of POST /clusters that name the version rather than launch it.
VERSION_KEYS = ("product", "version")


def find_version(product: str, version: str) -> ProductVersion | None:
    return launchable_versions().filter(product__name=product, version=version).first()


def launch_from_body(user, version: ProductVersion, body: Any) -> Cluster:
    """Parse the request (LaunchError, an OptionsError: 400 naming each bad field), then let
    the services check the quota and the group's budget (QuotaExceeded, BudgetExceeded: 403)
    and queue the cluster."""
    if not isinstance(body, dict):
        raise serializers.ValidationError(
            {"options": f"must be a JSON object, got {type(body).__name__}"}
        )
    request = parse_launch(version, {k: v for k, v in body.items() if k not in VERSION_KEYS}, user)
    name = request.name or _default_name(user, version)
    return launch(
        user,
        version,
        name,
        request.options,
        request.lease_hours,
        request.reuse_data_from,
        actor=user,
        spec=request.spec,
        idle_minutes=request.idle_minutes,
        allowed_sources=request.allowed_sources,
    )


def _default_name(user, version: ProductVersion) -> str:
    # Scripts (CESGA's among them) launch with {}: the product's name, numbered, not yet used.
    return names.default_name(user, version)
