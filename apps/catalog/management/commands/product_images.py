"""Build Platter's product images on a Docker engine and, for a site, push them.

    manage.py product_images                       # build on $DOCKER_HOST (or the local engine)
    manage.py product_images --registry reg.example.org --push spark hadoop

The site's portal then sets PLATTER_IMAGE_REGISTRY=reg.example.org: the catalog's
platter/<product>:<tag> names get that prefix. The JVM base is built from
deploy/images/jvm-base/Dockerfile (FROM debian:bookworm-slim); the lab imports the same file
system made by mmdebstrap instead, having no registry.
"""

import io
import os
import tarfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.nodes import NodeError, client
from apps.nodes.engine import Address
from apps.products import images as product_images
from apps.products.images.build import (
    BuildError,
    base_reference,
    ensure_built,
    stage,
)
from apps.products.images.recipe import IMAGES_DIR
from apps.products.images.sources import FetchError


class Command(BaseCommand):
    help = "Build the product images (deploy/images/) and optionally push them to a registry."

    def add_arguments(self, parser):
        parser.add_argument("products", nargs="*", help=f"default: {product_images.PRODUCTS}")
        parser.add_argument("--registry", default="", help="prefix, e.g. reg.example.org")
        parser.add_argument("--push", action="store_true", help="push after building")
        parser.add_argument(
            "--cache", default=str(settings.STATE_DIR / "cache" / "images"), type=Path
        )

    def handle(self, *args, products, registry, push, cache, **options):
        unknown = set(products) - set(product_images.PRODUCTS)
        if unknown:
            raise CommandError(f"no recipe for {', '.join(sorted(unknown))}")
        prefix = f"{registry.rstrip('/')}/" if registry else ""
        endpoint = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        engine = client(Address("build engine", endpoint, timeout=1800))
        base = prefix + base_reference()
        self.stdout.write(f"building {base}")
        try:
            engine.build_image(folder_context(IMAGES_DIR / "jvm-base"), base)
        except NodeError as error:
            raise CommandError(str(error)) from error
        built = [base]
        for recipe in product_images.recipes(tuple(products) or product_images.PRODUCTS):
            try:
                staged = stage(recipe, cache)
                ensure_built(
                    engine, staged, base if recipe.on_base else None, prefix + recipe.reference
                )
            except (BuildError, FetchError) as error:
                raise CommandError(str(error)) from error
            built.append(prefix + recipe.reference)
            self.stdout.write(f"built {prefix + recipe.reference} ({staged.content})")
        if push:
            for reference in built:
                try:
                    engine.push_image(reference)
                except NodeError as error:
                    raise CommandError(str(error)) from error
                self.stdout.write(f"pushed {reference}")


def folder_context(folder: Path) -> io.BytesIO:
    """A build context (a tar in memory) of a small folder such as deploy/images/jvm-base."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for item in sorted(folder.iterdir()):
            tar.add(item, arcname=item.name)
    context.seek(0)
    return context
