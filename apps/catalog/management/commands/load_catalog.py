"""Load or update the product catalog from fixtures/catalog.json (safe to run repeatedly)."""

from django.core.management.base import BaseCommand, CommandError

from apps.catalog.services import DEFAULT_CATALOG, CatalogFileError, load_catalog


class Command(BaseCommand):
    help = "Create or update products and versions from a catalog file; never deletes versions."

    def add_arguments(self, parser):
        parser.add_argument("path", nargs="?", default=str(DEFAULT_CATALOG))

    def handle(self, *args, path: str, **options):
        try:
            report = load_catalog(path)
        except CatalogFileError as exc:
            raise CommandError(str(exc)) from exc
        for kind in ("created", "updated", "unchanged"):
            names = getattr(report, kind)
            self.stdout.write(f"{kind}: {len(names)}" + (f" ({', '.join(names)})" if names else ""))
