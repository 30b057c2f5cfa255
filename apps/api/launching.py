"""Turning a launch request body into a services.launch call; shared by the Platter API and
the CESGA-compatible surface. The body is the product's options plus the launch-level keys
of catalog.options.LAUNCH_KEYS."""

from typing import Any

from rest_framework import serializers

from apps.catalog.models import ProductVersion
from apps.catalog.services import launchable_versions
from apps.clusters import names
from apps.clusters.models import Cluster
from apps.clusters.services import ReuseError, launch

from .serializers.clusters import LaunchSerializer

# Keys that never reach the product options (product/version come with POST /clusters).
ENVELOPE_KEYS = ("name", "lease", "reuse_data_from", "product", "version")


def find_version(product: str, version: str) -> ProductVersion | None:
    return launchable_versions().filter(product__name=product, version=version).first()


def launch_from_body(user, version: ProductVersion, body: Any) -> Cluster:
    """Validate the envelope, then let the services resolve the options (OptionsError),
    check the quota (QuotaExceeded) and queue the cluster."""
    if not isinstance(body, dict):
        raise serializers.ValidationError(
            {"options": f"must be a JSON object, got {type(body).__name__}"}
        )
    envelope = LaunchSerializer(data={k: v for k, v in body.items() if k in ENVELOPE_KEYS})
    envelope.is_valid(raise_exception=True)
    launch_keys = envelope.validated_data
    options = {k: v for k, v in body.items() if k not in ENVELOPE_KEYS}

    reuse = None
    if "reuse_data_from" in launch_keys:
        reuse = Cluster.objects.filter(owner=user, id=launch_keys["reuse_data_from"]).first()
        if reuse is None:
            raise ReuseError(f"you have no cluster {launch_keys['reuse_data_from']}")
    name = launch_keys.get("name") or _default_name(user, version)
    return launch(user, version, name, options, launch_keys.get("lease"), reuse, actor=user)


def _default_name(user, version: ProductVersion) -> str:
    # Scripts (CESGA's among them) launch with {}: the product's name, numbered, not yet used.
    return names.default_name(user, version)
