"""The catalog file's rows, for tests that need them there but do not test loading them.

load_catalog reads, validates and upserts each version (~56 queries, ~50 ms of CPU); hundreds
of API tests ask for the catalog, so each process loads it once (the first test to ask) and
then inserts the same rows again in two statements (issue 28). Loading itself is tested in
apps/catalog/tests/test_services.py."""

from django.db import models

from apps.catalog.models import Product, ProductVersion
from apps.catalog.services import load_catalog

_loaded: tuple[list[dict], list[dict]] | None = None


def _fields(row: models.Model) -> dict:
    return {field.attname: getattr(row, field.attname) for field in row._meta.concrete_fields}


def catalog_rows() -> None:
    """The rows load_catalog() makes in a database without a catalog (what a test starts with);
    load_catalog() itself where any of its products already is there."""
    global _loaded
    if _loaded is not None:
        products, versions = _loaded
        if not Product.objects.filter(name__in=[p["name"] for p in products]).exists():
            # The primary keys of the first load: its rows were rolled back, never reused.
            Product.objects.bulk_create([Product(**fields) for fields in products])
            ProductVersion.objects.bulk_create([ProductVersion(**f) for f in versions])
            return
    report = load_catalog()
    if _loaded is None and not report.updated and not report.unchanged:  # all of it new
        created = {tuple(label.split(" ", 1)) for label in report.created}
        found = ProductVersion.objects.select_related("product").filter(
            product__name__in={name for name, _ in created}
        )
        made = [v for v in found if (v.product.name, v.version) in created]
        _loaded = (
            [_fields(product) for product in {v.product_id: v.product for v in made}.values()],
            [_fields(version) for version in made],
        )
