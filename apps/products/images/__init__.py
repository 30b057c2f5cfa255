"""Product images built from the package sources a site reaches (no image is pulled ready-made).

Each product's recipe (``apps/products/<name>/image.py``: ``RECIPE``) says what its image holds
and where each part comes from (Debian, PyPI, Maven Central, the Go module proxy); its
Dockerfile and the scripts baked into it live in ``deploy/images/<product>/``. ``build.py``
stages a recipe's build context once (cached by content hash) and builds it on any Docker
engine: the lab's first node, or a site's build host; ``publish.py`` pushes it to a registry
(the site's, or the lab's) from which the nodes pull it.
"""

from __future__ import annotations

import importlib

from ..registry import HOME
from ..registry import PRODUCTS as REGISTERED
from .recipe import Recipe

# The images the lab builds, in the registry's order: every product with a recipe of its own
# (the demo runs on the lab's base image).
PRODUCTS = tuple(name for name in REGISTERED if (HOME / name / "image.py").exists())


def recipes(names: tuple[str, ...] = PRODUCTS) -> list[Recipe]:
    return [importlib.import_module(f"apps.products.{name}.image").RECIPE for name in names]
