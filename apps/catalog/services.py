"""Catalog rules: which versions users may launch, and loading the catalog file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet

from .models import Product, ProductVersion
from .revisions import DEFINITION_FIELDS

# The site's own entries (versions without a plugin of their own); each product's slice lives
# in its folder (apps/products/<name>/catalog.json): default_catalog() merges them.
SITE_CATALOG = Path(settings.BASE_DIR) / "fixtures" / "catalog.json"
PRODUCT_FIELDS = ("title", "description", "logo")
VERSION_FIELDS = ("description", *DEFINITION_FIELDS, "trusted", "enabled")


# Containers start with every capability dropped and get back only those their version
# declares. Declaring some of Docker's own default set (what any `docker run` gets) needs no
# review; anything beyond it (NET_ADMIN, SYS_ADMIN, ...) runs only once an admin trusts it.
# NET_RAW is left out although Docker grants it: raw sockets forge ARP and addresses on a
# cluster's segment, so a version that wants them (ping, say) needs an admin's trust.
DOCKER_DEFAULT_CAPABILITIES = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
]


def launchable_versions() -> QuerySet[ProductVersion]:
    """Enabled versions that need nothing beyond Docker's defaults, or that an admin trusts."""
    return (
        ProductVersion.objects.filter(enabled=True)
        .filter(Q(capabilities__contained_by=DOCKER_DEFAULT_CAPABILITIES) | Q(trusted=True))
        .select_related("product")
    )


def needs_trust(version: ProductVersion) -> list[str]:
    """The capabilities of a version beyond Docker's default set."""
    return sorted(set(version.capabilities or []) - set(DOCKER_DEFAULT_CAPABILITIES))


def is_launchable(version: ProductVersion) -> bool:
    return version.enabled and (not needs_trust(version) or version.trusted)


@dataclass
class LoadReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


class CatalogFileError(ValueError):
    pass


def read_catalog(path: Path | str) -> list[dict[str, Any]]:
    """The products of one catalog file ({"products": [...]})."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CatalogFileError(f"cannot read catalog {path}: {exc}") from exc
    products = data.get("products") if isinstance(data, dict) else None
    if not isinstance(products, list) or not all(isinstance(p, dict) for p in products):
        raise CatalogFileError(f"{path}: expected {{'products': [...]}}")
    return products


def default_catalog() -> list[dict[str, Any]]:
    """The catalog this portal ships: every product's slice (apps/products/<name>/
    catalog.json, in the registry's order), then the site's own file. A product may appear in
    several (its versions add up); its title, description and logo may be given in one of
    them, or the same in each. A version given twice is refused, naming both files."""
    from apps.products.registry import catalog_slices

    merged: dict[str, dict[str, Any]] = {}
    came_from: dict[tuple[str, str], Path] = {}
    for path in [*catalog_slices(), SITE_CATALOG]:
        for entry in read_catalog(path):
            name = str(entry.get("name", ""))
            product = merged.setdefault(name, {"name": name, "versions": []})
            for key in PRODUCT_FIELDS:
                if key in entry and product.setdefault(key, entry[key]) != entry[key]:
                    raise CatalogFileError(
                        f"{path}: product {name}'s {key} differs from another file's"
                    )
            for item in entry.get("versions", []):
                label = (name, str(item.get("version")))
                if label in came_from:
                    raise CatalogFileError(
                        f"{path}: {name} {label[1]} is also in {came_from[label]}"
                    )
                came_from[label] = path
                product["versions"].append(item)
    return list(merged.values())


def load_catalog(path: Path | str | None = None) -> LoadReport:
    """Create or update every product and version of the catalog file (by default the one
    this portal ships: default_catalog), keyed by (product name, version). Versions missing
    from it are left alone: clusters may reference them (disable them in the admin instead).
    All or nothing: one invalid version loads nothing."""
    products = default_catalog() if path is None else read_catalog(path)

    report = LoadReport()
    with transaction.atomic():
        for entry in products:
            product, _ = Product.objects.update_or_create(
                name=entry["name"], defaults={k: entry.get(k, "") for k in PRODUCT_FIELDS}
            )
            for item in entry.get("versions", []):
                _load_version(product, item, report)
    return report


def _load_version(product: Product, item: dict[str, Any], report: LoadReport) -> None:
    label = f"{product.name} {item['version']}"
    unknown = set(item) - {"version", *VERSION_FIELDS}
    if unknown:
        raise CatalogFileError(f"{label}: unknown keys {', '.join(sorted(unknown))}")
    found = (
        ProductVersion.objects.select_for_update()
        .filter(product=product, version=item["version"])
        .first()
    )
    created = found is None
    version = found or ProductVersion(product=product, version=item["version"])
    before = {name: getattr(version, name) for name in VERSION_FIELDS}
    for name in VERSION_FIELDS:
        if name in item:
            setattr(version, name, item[name])
    try:
        version.full_clean()
    except ValidationError as exc:
        raise CatalogFileError(f"{label}: {exc.message_dict}") from exc
    after = {name: getattr(version, name) for name in VERSION_FIELDS}
    if created or before != after:
        version.save()  # its next launch records the revision (apps/catalog/revisions.py)
        (report.created if created else report.updated).append(label)
    else:
        report.unchanged.append(label)
