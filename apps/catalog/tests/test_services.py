import json

import pytest

from apps.catalog.models import Product, ProductVersion
from apps.catalog.options import resolve, validate_definition
from apps.catalog.services import (
    CatalogFileError,
    default_catalog,
    is_launchable,
    launchable_versions,
    load_catalog,
)
from apps.catalog.templating import configure_plan, default_hostnames, instance_environment

pytestmark = pytest.mark.django_db
REAL_PRODUCTS = {"demo", "hadoop", "spark", "cassandra", "mongodb", "kafka"}


def test_it_loads_the_catalog_with_the_real_products():
    report = load_catalog()
    assert set(Product.objects.values_list("name", flat=True)) >= REAL_PRODUCTS
    assert "hadoop 3.4.2" in report.created and not report.updated
    assert ProductVersion.objects.get(product__name="demo").image == "platter/lab-base:1"


def test_it_loads_idempotently():
    load_catalog()
    ids = sorted(ProductVersion.objects.values_list("product__name", "version", "id"))
    report = load_catalog()
    assert report.created == [] and report.updated == []
    assert len(report.unchanged) == len(ids)
    assert sorted(ProductVersion.objects.values_list("product__name", "version", "id")) == ids


def test_it_updates_changed_versions_and_never_deletes_missing_ones(tmp_path):
    load_catalog()
    demo = next(p for p in default_catalog() if p["name"] == "demo")
    demo["versions"][0]["description"] = "changed"
    data = {"products": [demo]}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    report = load_catalog(path)
    assert report.updated == ["demo 1.0"]
    assert ProductVersion.objects.get(product__name="demo").description == "changed"
    assert ProductVersion.objects.filter(product__name="hadoop").exists()


def test_it_loads_nothing_when_one_version_is_broken(tmp_path):
    data = {"products": default_catalog()}
    data["products"][-1]["versions"][0]["disk_kind"] = "tape"
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogFileError, match="disk_kind"):
        load_catalog(path)
    assert not ProductVersion.objects.exists()


@pytest.mark.parametrize("options", [{}, {"size": 2}])
def test_it_resolves_every_catalog_version(options):
    load_catalog()
    for version in ProductVersion.objects.select_related("product"):
        validate_definition(version)
        spec = resolve(version, options)
        assert spec.instances, version
        assert all(i.cores >= 1 and i.memory_mb >= 64 for i in spec.instances)
        hosts = default_hostnames("c1", spec)
        for instance in spec.instances:
            env = instance_environment(version, spec, instance, "c1", hosts)
            assert "{{" not in json.dumps(env)
        plan = configure_plan(version, spec, "c1", hosts)
        assert "{{" not in repr(plan)


def test_it_sizes_the_demo_by_its_workers():
    load_catalog()
    demo = ProductVersion.objects.get(product__name="demo")
    spec = resolve(demo, {"size": 3, "disks": 2})
    assert spec.count("master") == 1 and spec.count("worker") == 3
    assert {i.disks for i in spec.instances} == {2}


def test_it_offers_only_enabled_versions_that_need_no_trust_or_are_trusted():
    load_catalog()
    demo = ProductVersion.objects.get(product__name="demo")
    spark = ProductVersion.objects.get(product__name="spark")
    ProductVersion.objects.filter(pk=spark.pk).update(enabled=False)
    ProductVersion.objects.filter(pk=demo.pk).update(capabilities=["NET_ADMIN"])
    names = set(launchable_versions().values_list("product__name", flat=True))
    assert names == REAL_PRODUCTS - {"spark", "demo"}
    ProductVersion.objects.filter(pk=demo.pk).update(trusted=True)
    assert launchable_versions().filter(pk=demo.pk).exists()
    demo.refresh_from_db()
    assert is_launchable(demo)


def test_it_loads_through_the_management_command_and_reports_counts():
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("load_catalog", stdout=out)
    call_command("load_catalog", stdout=out)
    lines = out.getvalue().splitlines()
    versions = ProductVersion.objects.count()
    assert versions > len(REAL_PRODUCTS)  # MongoDB: FerretDB in the lab, mongo:7.0 for sites
    assert lines[0].startswith(f"created: {versions} (")
    assert lines[3] == "created: 0" and lines[4] == "updated: 0"


def test_it_names_the_file_problem_in_the_command(tmp_path):
    from django.core.management import CommandError, call_command

    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(CommandError, match="cannot read catalog"):
        call_command("load_catalog", str(path))


def test_the_shipped_catalog_is_every_products_slice_and_the_sites_own_file(tmp_path, monkeypatch):
    from apps.catalog import services
    from apps.products import registry

    products = {p["name"]: p for p in default_catalog()}
    # MongoDB's FerretDB version comes from its product folder, 7.0 from the site's file.
    assert [v["version"] for v in products["mongodb"]["versions"]] == ["ferretdb-1.24", "7.0"]
    assert products["mongodb"]["title"]  # given once, in the FerretDB slice

    # A version given twice is refused, naming both files; so is a product told apart twice.
    site = tmp_path / "site.json"
    site.write_text(json.dumps({"products": [{"name": "kafka", "versions": [{"version": "4.3"}]}]}))
    monkeypatch.setattr(services, "SITE_CATALOG", site)
    with pytest.raises(CatalogFileError) as caught:
        default_catalog()
    slice_path = registry.HOME / "kafka" / "catalog.json"
    assert str(caught.value) == f"{site}: kafka 4.3 is also in {slice_path}"
    site.write_text(json.dumps({"products": [{"name": "kafka", "title": "Kafka!"}]}))
    with pytest.raises(CatalogFileError, match=r"product kafka's title differs from another"):
        default_catalog()
