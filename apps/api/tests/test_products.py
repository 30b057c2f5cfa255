"""Products and versions: what may be launched, with each version's options schema."""

import pytest

from apps.catalog.models import ProductVersion

from .conftest import PERSONAS

READ = {
    "anonymous": 401,
    "owner": 200,
    "other": 200,
    "read_only": 200,
    "expired": 401,
    "revoked": 401,
    "admin": 200,
}


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(
    "path", ["/api/v1/products", "/api/v1/products/demo", "/api/v1/products/demo/1.0"]
)
def test_it_lets_every_signed_in_caller_read_the_catalog(api, catalog, persona, path):
    assert api(persona).get(path).status_code == READ[persona]


def test_it_lists_products_with_their_launchable_versions(api, catalog):
    body = api("owner").get("/api/v1/products").json()
    names = [p["name"] for p in body["results"]]
    assert names == sorted(names) and "demo" in names
    demo = next(p for p in body["results"] if p["name"] == "demo")
    assert demo["versions"] == ["1.0"]
    assert demo["logo"].endswith("/static/catalog/logos/demo.svg")
    assert demo["description"]


def test_it_hides_versions_that_may_not_be_launched(api, catalog):
    ProductVersion.objects.filter(product__name="demo").update(enabled=False)
    assert api("owner").get("/api/v1/products/demo").status_code == 404
    assert api("owner").get("/api/v1/products/demo/1.0").status_code == 404


def test_it_shows_a_versions_options_schema(api, catalog):
    body = api("owner").get("/api/v1/products/demo/1.0").json()
    options = body["options"]
    assert options["required"] == {"size": 2}
    assert options["fields"]["size"]["min"] == 1 and options["fields"]["size"]["max"] == 8
    assert options["descriptions"]["cpu"] == "Cores per instance"
    assert "message" in options["advanced"]
    assert [r["name"] for r in body["roles"]] == ["master", "worker"]
    assert body["launch_url"].endswith("/api/v1/products/demo/1.0")


@pytest.mark.parametrize(
    ("product", "kinds", "resizable", "notebook"),
    [
        ("spark", ["pyspark", "spark-jar"], ["worker", "notebook"], True),
        ("hadoop", ["mapreduce"], ["worker"], False),
        ("cassandra", [], ["node"], False),
    ],
)
def test_a_version_lists_what_its_plugin_does(api, catalog, product, kinds, resizable, notebook):
    found = ProductVersion.objects.filter(product__name=product).first()
    assert found is not None
    body = api("owner").get(f"/api/v1/products/{product}/{found.version}").json()
    assert body["job_kinds"] == kinds
    assert body["resizable_roles"] == resizable
    assert body["notebook"] is notebook


def test_a_version_naming_no_plugin_resizes_no_role_with_disks_and_runs_no_jobs(api, catalog):
    """The generic plugin fails closed: demo's workers keep disks, so once its version names
    no plugin they are no longer resizable (the demo plugin resizes them)."""
    assert api("owner").get("/api/v1/products/demo/1.0").json()["resizable_roles"] == ["worker"]
    ProductVersion.objects.filter(product__name="demo").update(plugin="")
    body = api("owner").get("/api/v1/products/demo/1.0").json()
    assert all(role["disks"]["min"] > 0 for role in body["roles"])
    assert body["resizable_roles"] == []
    assert body["job_kinds"] == [] and body["notebook"] is False
