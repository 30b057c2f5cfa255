"""Every catalog version launches from the web form as it comes (its default shape), within
the demo user's quota: what a new user does first on `./platter run`."""

import pytest

from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_roomy_node
from apps.lab.management.commands.seed_demo import DEMO_QUOTA
from apps.web.forms import LaunchForm

pytestmark = pytest.mark.django_db


def catalog_versions() -> list[tuple[str, str]]:
    from apps.catalog.services import default_catalog

    return [(p["name"], v["version"]) for p in default_catalog() for v in p["versions"]]


@pytest.mark.parametrize(("product", "version"), catalog_versions())
def test_the_form_as_it_comes_launches_within_the_demo_quota(client, alice, product, version):
    load_catalog()
    make_roomy_node()  # launches are refused on a pool that could never run them
    Quota.objects.create(user=alice, **DEMO_QUOTA)
    chosen = ProductVersion.objects.get(product__name=product, version=version)
    form = LaunchForm(chosen, alice)
    data = {name: form[name].value() for name in form.fields}
    data = {name: "" if value is None else value for name, value in data.items()}
    client.force_login(alice)

    response = client.post(f"/catalog/{product}/{version}/launch", data)

    assert response.status_code == 302, response.content.decode()[-3000:]
    cluster = Cluster.objects.get(owner=alice)
    assert response["Location"] == f"/clusters/{cluster.id}/"
    assert cluster.state == Cluster.State.QUEUED


def test_option_fields_read_as_words_not_option_names(alice):
    from apps.web.forms import LaunchForm

    load_catalog()
    spark = ProductVersion.objects.get(product__name="spark", version="4.3.0")
    labels = {name: field.label for name, field in LaunchForm(spark, alice).fields.items()}
    assert labels["cpu"] == "Cores per instance"
    assert labels["mem"] == "Memory per instance (MB)"
    assert labels["size"] == "Size"
    assert "Cpu" not in labels.values() and "Mem" not in labels.values()
