"""The product images on every lab node, built from the package sources (no registry).

Each recipe's context is staged once on this machine (cached by content hash under
.local/cache/images, which `lab down` keeps), built on the first node, then copied from it to
the others at once; a node that already has the same content gets nothing. A product that
cannot be built (no network, a download gone) is reported and skipped: the lab still comes
up, and the catalog says that version's image is on no node.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from django.conf import settings

from apps import nodes
from apps.catalog import images as catalog_images
from apps.inventory.services import capacity_freed, record_images
from apps.nodes import NodeError, parallel
from apps.products import images as product_images
from apps.products.images.build import (
    BuildError,
    Staged,
    base_rootfs,
    ensure_base,
    ensure_built,
    ensure_copied,
    stage,
)
from apps.products.images.recipe import Recipe

from .daemons import local_endpoint, local_node
from .nodes import LabNode

BUILD_TIMEOUT = 1800  # seconds an engine call may take while it copies a big context


def cache_dir():
    return settings.STATE_DIR / "cache" / "images"


def lab_recipes() -> list[Recipe]:
    """The recipes of the images the lab puts on its nodes (settings.LAB_PRODUCTS)."""
    names = tuple(settings.LAB_PRODUCTS)
    return product_images.recipes(product_images.PRODUCTS if names == ("*",) else names)


def stage_product_images(log: Callable[[str], None] = print) -> list[tuple[Staged, bool]]:
    """Every product's build context and the JVM base's root file system, in the cache:
    downloads and packing, no node needed (`./platter test` runs this beside its fast tier).
    Returns (staged context, built on the base) for each product that could be staged."""
    recipes = lab_recipes()
    if not recipes:
        return []
    started = time.monotonic()
    outcomes = parallel(lambda recipe: stage(recipe, cache_dir()), recipes)
    staged: list[tuple[Staged, bool]] = []
    for recipe, outcome in zip(recipes, outcomes, strict=True):
        if isinstance(outcome, Exception):
            log(f"product image {recipe.reference}: NOT built, {outcome}")
        else:
            staged.append((outcome, recipe.on_base))
    base_rootfs(cache_dir())  # once, before the nodes import it in parallel
    log(f"product images staged in {time.monotonic() - started:.0f} s")
    return staged


class Progress:
    """Where a preparation stands, told as it goes (the default tells no one: `lab up`)."""

    def step(self, images: list[str], words: str, nodes_ready: int | None = None) -> None:
        pass

    def landed(self, nodes: list[LabNode]) -> None:
        """These nodes hold new images now."""


def ensure_product_images(
    nodes: list[LabNode], log: Callable[[str], None] = print, progress: Progress | None = None
) -> None:
    progress = progress or Progress()
    staged = stage_product_images(log)
    if not staged:
        return
    references = [item.reference for item, _ in staged]

    def build_on(node: LabNode) -> list[str]:
        base = ensure_base(local_node(node, timeout=BUILD_TIMEOUT), cache_dir())

        def build(entry: tuple[Staged, bool]) -> bool:
            item, on_base = entry
            client = local_node(node, timeout=BUILD_TIMEOUT)  # a connection per build
            return ensure_built(client, item, base if on_base else None)

        # All products at once: while one build copies its release in (the disk), another
        # dumps its class archives (the cores). One that fails does not stop the others.
        outcomes = parallel(build, staged)
        failed = [error for error in outcomes if isinstance(error, Exception)]
        if failed:
            raise BuildError("; ".join(str(error) for error in failed))
        return [item.reference for (item, _), done in zip(staged, outcomes, strict=True) if done]

    def copy_to(node: LabNode) -> list[str]:
        client = local_node(node, timeout=BUILD_TIMEOUT)
        base = ensure_base(client, cache_dir())
        copied = []
        for item, on_base in staged:
            try:
                done = ensure_copied(source, client, item)
            except BuildError:  # the first node could not build it: this one tries
                done = ensure_built(client, item, base if on_base else None)
            if done:
                copied.append(item.reference)
        return copied

    # Built on the first node, then copied to the others in parallel: a build unpacks the
    # releases and runs each daemon's JVM once for its class archive, minutes of CPU per node
    # on a small machine, while a copy only moves the layers.
    started = time.monotonic()
    source = local_node(nodes[0], timeout=BUILD_TIMEOUT)
    steps = (
        ("built", nodes[:1], build_on, f"building on {nodes[0].name}", 0),
        ("copied", nodes[1:], copy_to, "copying to the other nodes", 1),
    )
    for verb, group, work, words, ready in steps:
        if not group:
            continue
        progress.step(references, words, ready)
        outcomes = parallel(work, group)
        progress.landed(group)
        for node, outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, Exception):
                log(f"{node.name}: product images NOT {verb}: {outcome}")
            else:
                what = ", ".join(outcome) if outcome else "all up to date"
                took = time.monotonic() - started
                log(f"{node.name}: product images {verb}: {what} ({took:.0f} s)")


class Recorded(Progress):
    """A preparation behind a running portal: each image's step in the catalog
    (ImagePreparation), the nodes' images in the inventory as they land, and the admission
    queue woken so that launches waiting for an image go on."""

    def step(self, images: list[str], words: str, nodes_ready: int | None = None) -> None:
        for image in images:
            catalog_images.preparation_step(image, words, nodes_ready)

    def landed(self, nodes: list[LabNode]) -> None:
        for node in nodes:
            record_images(node.name, node_images(node))


def prepare_product_images(nodes: list[LabNode], log: Callable[[str], None] = print) -> None:
    """The product images put on the lab's nodes behind a portal that already answers
    (`./platter run`): the images some node lacks are marked as being prepared, so a launch
    of their versions queues with the step as its reason; each ends ready, or failed with
    the reason when it is on no node at the end (or the preparation was interrupted)."""
    wanted = [recipe.reference for recipe in lab_recipes()]
    held = [set(node_images(node)) for node in nodes]
    absent = [image for image in wanted if any(image not in h for h in held)]
    if not absent:
        log("product images: on every node already" if wanted else "product images: none asked")
        return
    catalog_images.start_preparing(absent, len(nodes))
    outcome = "interrupted before the image was on the nodes"
    try:
        ensure_product_images(nodes, log, Recorded())
        outcome = ""
    finally:
        on_some: set[str] = set()
        for node in nodes:
            # (a node stopped meanwhile: its images count as absent)
            with contextlib.suppress(NodeError):
                on_some |= set(node_images(node))
        for image in absent:
            missing = image not in on_some
            catalog_images.preparation_ended(
                image, (outcome or "it could not be built: see the lab's log") if missing else ""
            )
        capacity_freed()


def node_images(node: LabNode) -> list[str]:
    """What the node holds, as the reconciler records it (the catalog reads it)."""
    return nodes.client(local_endpoint(node)).images()
