"""The product images on every lab node, built from the package sources and moved through
the lab's registry (apps/lab/registry.py) as a site's are.

An image is known by its recipe's content hash. One the registry holds under that hash is
only pulled; one it lacks is staged (downloads cached under .local/cache/images), built on the
first node and pushed once; then every node that lacks it pulls it, all at once; a node that
already has the same content gets nothing. A product that cannot be built (no network, a
download gone) is reported and skipped: the lab still comes up, and the catalog says that
version's image is on no node.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from django.conf import settings

from apps import nodes
from apps.catalog import images as catalog_images
from apps.inventory.services import capacity_freed, record_images
from apps.nodes import NodeClient, NodeError, parallel
from apps.products import images as product_images
from apps.products.images.build import (
    BASE_REPOSITORY,
    BuildError,
    Staged,
    base_content,
    base_reference,
    base_rootfs,
    ensure_base,
    ensure_built,
    holds,
    recipe_content,
    stage,
)
from apps.products.images.publish import Registry, content_tag, pull, push
from apps.products.images.recipe import Recipe

from . import registry as lab_registry
from .daemons import local_endpoint, local_node
from .nodes import LabNode, current

BUILD_TIMEOUT = 1800  # seconds an engine call may take while it copies a big context


def cache_dir():
    return settings.STATE_DIR / "cache" / "images"


def lab_recipes() -> list[Recipe]:
    """The recipes of the images the lab puts on its nodes (settings.LAB_PRODUCTS)."""
    names = tuple(settings.LAB_PRODUCTS)
    return product_images.recipes(product_images.PRODUCTS if names == ("*",) else names)


def stage_product_images(
    recipes: list[Recipe] | None = None, log: Callable[[str], None] = print
) -> list[tuple[Recipe, Staged]]:
    """The recipes' build contexts (default: every lab recipe's) and the JVM base's root file
    system, in the cache: downloads and packing, no node needed (`./platter test` runs this
    beside its fast tier). Returns each recipe that could be staged with its context."""
    recipes = lab_recipes() if recipes is None else recipes
    if not recipes:
        return []
    started = time.monotonic()
    outcomes = parallel(lambda recipe: stage(recipe, cache_dir()), recipes)
    staged: list[tuple[Recipe, Staged]] = []
    for recipe, outcome in zip(recipes, outcomes, strict=True):
        if isinstance(outcome, Exception):
            log(f"product image {recipe.reference}: NOT built, {outcome}")
        else:
            staged.append((recipe, outcome))
    base_cached = lab_registry.LabRegistry(current()).stored(
        BASE_REPOSITORY, content_tag(base_content())
    )
    if any(recipe.on_base for recipe, _ in staged) and not base_cached:
        base_rootfs(cache_dir())  # once, before a node imports it (else it is pulled)
    log(f"product images staged in {time.monotonic() - started:.0f} s")
    return staged


def recipes_to_build() -> list[Recipe]:
    """The lab's recipes whose content the registry's cache lacks: what `lab up` would build
    (`lab stage` stages only these)."""
    stored = lab_registry.LabRegistry(current()).stored
    return [
        recipe
        for recipe in lab_recipes()
        if not stored(recipe.repository, content_tag(recipe_content(recipe)))
    ]


class Progress:
    """Where a preparation stands, told as it goes (the default tells no one: `lab up`)."""

    def step(self, images: list[str], words: str, nodes_ready: int | None = None) -> None:
        pass

    def landed(self, nodes: list[LabNode]) -> None:
        """These nodes hold new images now."""


def ensure_product_images(
    nodes: list[LabNode], log: Callable[[str], None] = print, progress: Progress | None = None
) -> None:
    """Every lab recipe's image on every node, through the lab's registry as a site would:
    what the registry lacks is staged, built on the first node and pushed once; then every
    node that lacks an image pulls it, all nodes at once. The registry's storage outlives
    `lab down`, so an image whose recipe did not change is only pulled."""
    progress = progress or Progress()
    recipes = lab_recipes()
    if not recipes:
        return
    started = time.monotonic()
    contents = {recipe.reference: recipe_content(recipe) for recipe in recipes}
    clients = {node.name: local_node(node, timeout=BUILD_TIMEOUT) for node in nodes}
    lacking = {
        node.name: [
            recipe
            for recipe in recipes
            if not holds(clients[node.name], recipe.reference, contents[recipe.reference])
        ]
        for node in nodes
    }
    needed = [recipe for recipe in recipes if any(recipe in lack for lack in lacking.values())]
    if not needed:
        log("product images: every node holds them already")
        return
    registry, _ = lab_registry.ensure_running(nodes[0].spec)
    cached = [r for r in needed if registry.has(r.repository, content_tag(contents[r.reference]))]
    to_build = [recipe for recipe in needed if recipe not in cached]
    if cached:
        log(f"product images in the lab's registry already: {_names(cached)}")
    built: list[Recipe] = []
    if to_build:
        progress.step(_references(to_build), f"building on {nodes[0].name}", 0)
        built = _build_and_push(nodes[0], to_build, registry, log)
        lacking[nodes[0].name] = [r for r in lacking[nodes[0].name] if r not in built]
        progress.landed(nodes[:1])
        log(f"product images built and pushed: {_names(built)} ({_since(started)})")
    in_registry = cached + built  # one that could not be built is on no node: said above

    def pull_on(node: LabNode) -> list[str]:
        """What the node pulled; one image that fails is said and the others go on."""
        client = clients[node.name]
        pulled = []
        for recipe in (r for r in lacking[node.name] if r in in_registry):
            try:
                pull(client, recipe.reference, contents[recipe.reference], registry)
                pulled.append(recipe.reference)
            except BuildError as error:
                log(f"{node.name}: product image {recipe.reference} NOT pulled: {error}")
        return pulled

    ready = sum(1 for node in nodes if not lacking[node.name])
    progress.step(_references(needed), "pulling from the registry", ready)
    outcomes = parallel(pull_on, nodes)
    progress.landed(nodes)
    for node, outcome in zip(nodes, outcomes, strict=True):
        if isinstance(outcome, Exception):
            log(f"{node.name}: product images NOT pulled: {outcome}")
        elif outcome:
            log(f"{node.name}: product images pulled: {', '.join(outcome)} ({_since(started)})")


def _build_and_push(
    node: LabNode, recipes: list[Recipe], registry: Registry, log: Callable[[str], None]
) -> list[Recipe]:
    """The recipes staged, built on `node` and pushed; returns those that made it (each one
    that did not is logged, the others go on)."""
    staged = stage_product_images(recipes, log)
    on_base = any(recipe.on_base for recipe, _ in staged)
    base = _base_on(local_node(node, timeout=BUILD_TIMEOUT), registry) if on_base else None

    def build_and_push(entry: tuple[Recipe, Staged]) -> None:
        recipe, item = entry
        client = local_node(node, timeout=BUILD_TIMEOUT)  # a connection per build
        ensure_built(client, item, base if recipe.on_base else None)
        push(client, item.reference, item.content, registry)

    # All products at once: while one build copies its release in (the disk), another
    # dumps its class archives (the cores). One that fails does not stop the others.
    outcomes = parallel(build_and_push, staged)
    done = []
    for (recipe, _), outcome in zip(staged, outcomes, strict=True):
        if isinstance(outcome, Exception):
            log(f"product image {recipe.reference}: NOT built on {node.name}: {outcome}")
        else:
            done.append(recipe)
    return done


def _base_on(client: NodeClient, registry: Registry) -> str:
    """The JVM base on the building node: kept, pulled from the registry, or else imported
    from its Debian root file system (made by mmdebstrap, about a minute) and pushed, so the
    next lab that must build a changed product pulls it instead."""
    content = base_content()
    if holds(client, base_reference(), content):
        return base_reference()
    if registry.has(BASE_REPOSITORY, content_tag(content)):
        pull(client, base_reference(), content, registry)
        return base_reference()
    reference = ensure_base(client, cache_dir())
    push(client, reference, content, registry)
    return reference


def _references(recipes: list[Recipe]) -> list[str]:
    return [recipe.reference for recipe in recipes]


def _names(recipes: list[Recipe]) -> str:
    return ", ".join(_references(recipes)) or "none"


def _since(started: float) -> str:
    return f"{time.monotonic() - started:.0f} s"


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
