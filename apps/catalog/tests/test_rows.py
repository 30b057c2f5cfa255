"""Tests' catalog rows (rows.py) are the rows load_catalog makes."""

import pytest

from apps.catalog.models import Product, ProductVersion
from apps.catalog.services import load_catalog
from apps.catalog.tests import rows
from apps.catalog.tests.rows import catalog_rows

pytestmark = pytest.mark.django_db


def catalog() -> dict:
    """Every catalog row's fields but its creation time."""
    found = {}
    for version in ProductVersion.objects.select_related("product"):
        fields = {k: v for k, v in rows._fields(version).items() if k != "created"}
        found[(version.product.name, version.version)] = (rows._fields(version.product), fields)
    return found


def empty() -> None:
    ProductVersion.objects.all().delete()
    Product.objects.all().delete()


def test_the_rows_inserted_again_are_those_load_catalog_makes(monkeypatch):
    monkeypatch.setattr(rows, "_loaded", None)  # this process's first catalog
    catalog_rows()
    first = catalog()
    assert rows._loaded is not None and len(first) == len(rows._loaded[1]) >= 6
    empty()
    catalog_rows()  # from what the first one kept
    assert catalog() == first
    empty()
    load_catalog()
    ids = ("id", "product_id")
    assert {
        key: ({**p, "id": 0}, {k: v for k, v in f.items() if k not in ids})
        for key, (p, f) in catalog().items()
    } == {
        key: ({**p, "id": 0}, {k: v for k, v in f.items() if k not in ids})
        for key, (p, f) in first.items()
    }


def test_with_a_product_already_there_it_loads_the_catalog_for_real(monkeypatch):
    catalog_rows()
    empty()
    Product.objects.create(name="demo", title="Old title")

    catalog_rows()  # no duplicate product: load_catalog updates it

    assert Product.objects.get(name="demo").title != "Old title"
    assert ProductVersion.objects.filter(product__name="demo").exists()
