"""Load or update the product catalog: by default the one Platter ships (each product's
slice in apps/products/<name>/catalog.json and the site's fixtures/catalog.json); safe to run
repeatedly."""

from django.core.management.base import BaseCommand, CommandError

from apps.catalog.services import CatalogFileError, load_catalog


class Command(BaseCommand):
    help = "Create or update products and versions from a catalog file; never deletes versions."

    def add_arguments(self, parser):
        parser.add_argument(
            "path", nargs="?", default=None, help="a catalog file (default: the shipped catalog)"
        )

    def handle(self, *args, path: str | None, **options):
        try:
            report = load_catalog(path)
        except CatalogFileError as exc:
            raise CommandError(str(exc)) from exc
        for kind in ("created", "updated", "unchanged"):
            names = getattr(report, kind)
            self.stdout.write(f"{kind}: {len(names)}" + (f" ({', '.join(names)})" if names else ""))
