"""Which plugin a product version uses: by the name its definition gives (``"plugin"``),
never by the product's name, which an admin may edit. A product is one line of PRODUCTS
below: the package apps/products/<name>/, whose plugin.py has PLUGIN and whose catalog.json
holds its slice of the catalog (apps/catalog/services.default_catalog reads them). The catalog
refuses a definition naming a plugin not listed (apps/catalog/spec.py)."""

from importlib import import_module
from pathlib import Path
from typing import Any

from . import generic
from .base import ProductPlugin

PRODUCTS = (
    "demo",
    "hadoop",
    "spark",
    "cassandra",
    "ferretdb",
    "kafka",
)
HOME = Path(__file__).resolve().parent
GENERIC = generic.PLUGIN.name

PLUGINS: dict[str, ProductPlugin] = {generic.PLUGIN.name: generic.PLUGIN} | {
    plugin.name: plugin
    for plugin in (import_module(f"{__package__}.{name}.plugin").PLUGIN for name in PRODUCTS)
}


def names() -> list[str]:
    return sorted(PLUGINS)


def get(name: str) -> ProductPlugin:
    """The plugin called `name` ("" or None: the generic one); KeyError for an unknown one."""
    return PLUGINS[name or GENERIC]


def plugin_for(version: Any) -> ProductPlugin:
    """The plugin of a version's definition: a ProductVersion, a cluster's frozen definition
    (Cluster.definition), a parsed ProductDefinition or a definition dict. One naming a plugin
    this site does not have (a revision from a newer portal) gets the generic one: it refuses
    what it does not know how to do."""
    name = version.get("plugin") if isinstance(version, dict) else getattr(version, "plugin", "")
    return PLUGINS.get(name or GENERIC, PLUGINS[GENERIC])


def catalog_slices() -> list[Path]:
    """Each product's slice of the catalog (apps/products/<name>/catalog.json), in PRODUCTS'
    order; a product whose versions all come from the site's own catalog has none."""
    return [path for name in PRODUCTS if (path := HOME / name / "catalog.json").exists()]
