"""What a product image is made of."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

IMAGES_DIR = Path(__file__).resolve().parents[3] / "deploy" / "images"


@dataclass(frozen=True)
class Recipe:
    """One product image.

    ``fetch(dest, cache)`` downloads the product into ``dest``, laid out as the image's file
    tree (e.g. ``dest/opt/spark/...``), keeping downloads in ``cache`` between builds.
    ``inputs`` names everything fetch downloads, with versions: with the files under
    ``deploy/images/<product>/`` they make the content hash, so a change to either rebuilds.
    """

    product: str  # folder under deploy/images/ and the image name platter/<product>
    tag: str  # the product version the image carries
    inputs: tuple[str, ...]
    fetch: Callable[[Path, Path], None]
    on_base: bool = True  # FROM the JVM base image; False: the Dockerfile starts FROM scratch

    @property
    def folder(self) -> Path:
        return IMAGES_DIR / self.product

    @property
    def repository(self) -> str:
        return f"platter/{self.product}"

    @property
    def reference(self) -> str:
        """The image name the catalog uses (without the site's registry prefix)."""
        return f"{self.repository}:{self.tag}"
