"""Which image a version's containers run, and whether any node has it.

The catalog names Platter's own product images ``platter/<product>:<tag>``; a site that keeps
them in a registry sets PLATTER_IMAGE_REGISTRY (e.g. ``registry.example.org``) and every such
name gets that prefix, so the lab and production differ only there. Other images (an official
``mongo:7.0``) are used as written.
"""

from __future__ import annotations

from django.conf import settings

from .models import ProductVersion

OWN_IMAGES = "platter/"


class ImageUnavailable(Exception):
    """No active node has an image the version needs, and none can be pulled here."""

    def __init__(self, images: list[str]) -> None:
        self.images = images
        super().__init__(
            f"image {', '.join(images)} is on no active node; an admin must build or load it first"
        )


def site_image(image: str) -> str:
    registry = settings.IMAGE_REGISTRY.rstrip("/")
    if registry and image.startswith(OWN_IMAGES):
        return f"{registry}/{image}"
    return image


def version_images(version: ProductVersion) -> list[str]:
    """Every image the version's roles run, as the nodes name them."""
    names = {role.get("image") or version.image for role in version.roles or []}
    return sorted(site_image(name) for name in names if name)


def images_on_nodes() -> set[str]:
    from apps.inventory.models import Node  # the inventory knows nodes; the catalog not

    held: set[str] = set()
    for images in Node.objects.filter(state=Node.State.ACTIVE).values_list("images", flat=True):
        held.update(images or [])
    return held


def missing_images(version: ProductVersion, held: set[str] | None = None) -> list[str]:
    """The version's images that no active node holds (``held``: images_on_nodes(), when the
    caller checks many versions). Empty when the site pulls images from a registry
    (PLATTER_IMAGE_PULLS): a node then fetches what it lacks."""
    if settings.IMAGE_PULLS:
        return []
    held = images_on_nodes() if held is None else held
    return [image for image in version_images(version) if image not in held]


def require_images(version: ProductVersion) -> None:
    missing = missing_images(version)
    if missing:
        raise ImageUnavailable(missing)
