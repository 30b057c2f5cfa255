"""Which image a version's containers run, and whether any node has it.

The catalog names Platter's own product images ``platter/<product>:<tag>``; a site that keeps
them in a registry sets PLATTER_IMAGE_REGISTRY (e.g. ``registry.example.org``) and every such
name gets that prefix, so the lab and production differ only there. Other images (an official
``mongo:7.0``) are used as written.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from .models import ImagePreparation, ProductVersion

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


def image_verdict(
    version: ProductVersion, held: set[str] | None = None
) -> tuple[list[str], str | None]:
    """What a launch of the version would meet, from one look at the preparations: its
    images on no node and not being prepared (it would be refused), and why it would wait
    (waiting_for_images' words), or None."""
    preparing = being_prepared(version_images(version))
    prepared = {p.image for p in preparing}
    unavailable = [image for image in missing_images(version, held) if image not in prepared]
    return unavailable, _waiting_words(preparing)


def require_images(version: ProductVersion) -> None:
    """ImageUnavailable when a version's image is on no node and none is being prepared (a
    launch of one being prepared queues until it is ready: waiting_for_images)."""
    missing, _waiting = image_verdict(version)
    if missing:
        raise ImageUnavailable(missing)


# ------------------------------------------------------------------ images being prepared


# A preparation that said nothing for this long died with its process (a `kill -9`, a lost
# machine): launches stop waiting for it. Its longest silent step, a build, takes minutes.
PREPARATION_SILENT_FOR = timedelta(minutes=20)


def _under_way() -> QuerySet[ImagePreparation]:
    return ImagePreparation.objects.filter(
        state=ImagePreparation.State.PREPARING,
        updated__gte=timezone.now() - PREPARATION_SILENT_FOR,
    )


def being_prepared(images: list[str]) -> list[ImagePreparation]:
    """The preparations under way of these images."""
    if not images:
        return []
    return list(_under_way().filter(image__in=images).order_by("image"))


def preparation_words(preparation: ImagePreparation) -> str:
    """What a user reads: "being prepared: 2 of 4 nodes (copying to the others)"."""
    words = "being prepared"
    if preparation.nodes_total:
        words += f": {preparation.nodes_ready} of {preparation.nodes_total} nodes"
    return f"{words} ({preparation.step})" if preparation.step else words


def any_prepared_lately() -> bool:
    """Whether an image is being prepared or failed to be (the admission queue's first
    question: nearly always no, in one small query)."""
    return ImagePreparation.objects.exclude(state=ImagePreparation.State.READY).exists()


def waiting_for_images(version: ProductVersion) -> str | None:
    """Why a queued cluster of this version (a cluster's definition) must wait for its
    image, or None: the portal answered before the image was on the nodes."""
    return _waiting_words(being_prepared(version_images(version)))


def _waiting_words(preparing: list[ImagePreparation]) -> str | None:
    return "; ".join(f"image {p.image} is {preparation_words(p)}" for p in preparing) or None


def preparation_failure(version: ProductVersion) -> str | None:
    """Why a queued cluster of this version can never start: an image on no node whose
    preparation failed (its reason), or None."""
    missing = missing_images(version)
    if not missing:
        return None
    failed = ImagePreparation.objects.filter(
        state=ImagePreparation.State.FAILED, image__in=missing
    ).order_by("image")
    reasons = [f"image {p.image} could not be prepared ({p.step})" for p in failed]
    return "; ".join(reasons) or None


def start_preparing(
    images: list[str], nodes_total: int, step: str = "fetching and packing its sources"
) -> None:
    """A preparation of these images begins (or begins again): launches of their versions
    queue from now until each is marked ready or failed."""
    for image in images:
        ImagePreparation.objects.update_or_create(
            image=image,
            defaults={
                "state": ImagePreparation.State.PREPARING,
                "step": step,
                "nodes_ready": 0,
                "nodes_total": nodes_total,
            },
        )


def preparation_step(image: str, step: str, nodes_ready: int | None = None) -> None:
    # update() skips auto_now: each step says the preparation is alive (PREPARATION_SILENT_FOR).
    changes: dict = {"step": step[:300], "updated": timezone.now()}
    if nodes_ready is not None:
        changes["nodes_ready"] = nodes_ready
    ImagePreparation.objects.filter(image=image, state=ImagePreparation.State.PREPARING).update(
        **changes
    )


def preparation_ended(image: str, error: str = "") -> None:
    """Ready (on the nodes) or failed with the reason; either way the launches queued for it
    go on: the queue is woken, and a version whose image is on no node is refused as before."""
    state = ImagePreparation.State.FAILED if error else ImagePreparation.State.READY
    ImagePreparation.objects.filter(image=image).update(state=state, step=error[:300])
