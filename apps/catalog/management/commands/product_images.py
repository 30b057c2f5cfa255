"""Build Platter's product images on a Docker engine and, for a site, push them to its registry.

    manage.py product_images build [spark hadoop ...]       # on $DOCKER_HOST (or the local one)
    manage.py product_images push --registry reg.example.org [--username U --password-file F]

`push` builds only what the registry lacks: each image goes up under its version
(platter/spark:4.3.0) and its recipe's content hash (content-<hash>), and a recipe whose content
the registry holds already is left alone. The site's portal then sets
PLATTER_IMAGE_REGISTRY=reg.example.org and the nodes pull. The lab runs the same steps against
its own registry (apps/lab/registry.py). The JVM base is built from
deploy/images/jvm-base/Dockerfile (FROM debian:bookworm-slim); the lab imports the same file
system made by mmdebstrap instead.
"""

import io
import os
import tarfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.nodes import NodeClient, NodeError, client
from apps.nodes.engine import Address
from apps.products import images as product_images
from apps.products.images.build import (
    BuildError,
    base_reference,
    ensure_built,
    recipe_content,
    stage,
)
from apps.products.images.publish import Registry, content_tag, push
from apps.products.images.recipe import IMAGES_DIR
from apps.products.images.sources import FetchError


class Command(BaseCommand):
    help = "Build the product images (deploy/images/), or build what a registry lacks and push it."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["build", "push"])
        parser.add_argument("products", nargs="*", help=f"default: {product_images.PRODUCTS}")
        parser.add_argument("--registry", default="", help="push: e.g. reg.example.org[:port]")
        parser.add_argument("--username", default="", help="push: the registry's sign-in")
        parser.add_argument(
            "--password-file", type=Path, help="push: a file holding the registry's password"
        )
        parser.add_argument(
            "--ca-file", type=Path, help="push: the CA of the registry's certificate"
        )
        parser.add_argument(
            "--cache", default=str(settings.STATE_DIR / "cache" / "images"), type=Path
        )

    def handle(self, *args, action, products, cache, **options):
        unknown = set(products) - set(product_images.PRODUCTS)
        if unknown:
            raise CommandError(f"no recipe for {', '.join(sorted(unknown))}")
        registry = _registry(action, options) if action == "push" else None
        endpoint = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        engine = client(Address("build engine", endpoint, timeout=1800))
        base = ""
        for recipe in product_images.recipes(tuple(products) or product_images.PRODUCTS):
            content = recipe_content(recipe)
            try:
                if registry and registry.has(recipe.repository, content_tag(content)):
                    self.stdout.write(f"unchanged: {recipe.reference} ({content}) is there")
                    continue
                if recipe.on_base and not base:
                    base = self._build_base(engine)
                staged = stage(recipe, cache)
                ensure_built(engine, staged, base if recipe.on_base else None)
                self.stdout.write(f"built {recipe.reference} ({content})")
                if registry:
                    for pushed in push(engine, recipe.reference, content, registry):
                        self.stdout.write(f"pushed {pushed}")
            except (BuildError, FetchError) as error:
                raise CommandError(str(error)) from error

    def _build_base(self, engine: NodeClient) -> str:
        self.stdout.write(f"building {base_reference()}")
        try:
            engine.build_image(folder_context(IMAGES_DIR / "jvm-base"), base_reference())
        except NodeError as error:
            raise CommandError(str(error)) from error
        return base_reference()


def _registry(action: str, options: dict) -> Registry:
    if not options["registry"]:
        raise CommandError(f"{action} needs --registry (e.g. reg.example.org)")
    password = ""
    if options["password_file"]:
        try:
            password = options["password_file"].read_text().strip()
        except OSError as error:
            raise CommandError(f"cannot read --password-file: {error}") from error
    return Registry(
        options["registry"].rstrip("/"), options["username"], password, options["ca_file"]
    )


def folder_context(folder: Path) -> io.BytesIO:
    """A build context (a tar in memory) of a small folder such as deploy/images/jvm-base."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for item in sorted(folder.iterdir()):
            tar.add(item, arcname=item.name)
    context.seek(0)
    return context
