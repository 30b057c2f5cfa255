"""Product images built from the package sources a site reaches, with no container registry.

One recipe per product (``spark.py``, ``hadoop.py``, ...) says what its image holds and where
each part comes from (Debian, PyPI, Maven Central, the Go module proxy); its Dockerfile and the
scripts baked into it live in ``deploy/images/<product>/``. ``build.py`` stages a recipe's
build context once (cached by content hash) and builds it on any Docker engine: the lab's
nodes, or a site's build host that then pushes to its registry.
"""

from __future__ import annotations

import importlib

from .recipe import Recipe

# The images the lab builds, in build order (one module of this package each).
PRODUCTS = ("spark", "hadoop", "cassandra", "ferretdb", "kafka")


def recipes(names: tuple[str, ...] = PRODUCTS) -> list[Recipe]:
    return [importlib.import_module(f"{__name__}.{name}").RECIPE for name in names]
