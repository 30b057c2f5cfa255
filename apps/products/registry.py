"""Which plugin a product version uses: by the name its definition gives (``"plugin"``),
never by the product's name, which an admin may edit. One line per plugin below; the catalog
refuses a definition naming one not listed (apps/catalog/spec.py). A new product adds its
import and its entry in PLUGINS (apps/products/<name>/plugin.py's PLUGIN)."""

from typing import Any

from . import generic
from .base import ProductPlugin
from .cassandra import plugin as cassandra
from .demo import plugin as demo
from .ferretdb import plugin as ferretdb
from .hadoop import plugin as hadoop
from .kafka import plugin as kafka
from .spark import plugin as spark

GENERIC = generic.PLUGIN.name

PLUGINS: dict[str, ProductPlugin] = {
    plugin.name: plugin
    for plugin in [
        generic.PLUGIN,
        demo.PLUGIN,
        hadoop.PLUGIN,
        spark.PLUGIN,
        cassandra.PLUGIN,
        ferretdb.PLUGIN,
        kafka.PLUGIN,
    ]
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
