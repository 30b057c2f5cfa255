"""Build Platter's product images on a Docker engine and, for a site, push them.

    manage.py product_images                       # build on $DOCKER_HOST (or the local engine)
    manage.py product_images --registry reg.example.org --push spark hadoop

The site's portal then sets PLATTER_IMAGE_REGISTRY=reg.example.org: the catalog's
platter/<product>:<tag> names get that prefix. The JVM base is built from
deploy/images/jvm-base/Dockerfile (FROM debian:bookworm-slim); the lab imports the same file
system made by mmdebstrap instead, having no registry.
"""

from pathlib import Path

import docker
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.catalog import product_images
from apps.catalog.product_images.build import (
    BuildError,
    base_reference,
    ensure_built,
    stage,
)
from apps.catalog.product_images.recipe import IMAGES_DIR
from apps.catalog.product_images.sources import FetchError


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
        client = docker.from_env(timeout=1800)
        base = prefix + base_reference()
        self.stdout.write(f"building {base}")
        client.images.build(path=str(IMAGES_DIR / "jvm-base"), tag=base, rm=True)
        built = [base]
        for recipe in product_images.recipes(tuple(products) or product_images.PRODUCTS):
            try:
                staged = stage(recipe, cache)
                ensure_built(
                    client, staged, base if recipe.on_base else None, prefix + recipe.reference
                )
            except (BuildError, FetchError) as error:
                raise CommandError(str(error)) from error
            built.append(prefix + recipe.reference)
            self.stdout.write(f"built {prefix + recipe.reference} ({staged.content})")
        if push:
            for reference in built:
                repository, tag = reference.rsplit(":", 1)
                for line in client.images.push(repository, tag, stream=True, decode=True):
                    if "error" in line:
                        raise CommandError(f"push {reference}: {line['error']}")
                self.stdout.write(f"pushed {reference}")
