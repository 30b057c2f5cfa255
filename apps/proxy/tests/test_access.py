"""What the cluster page, the APIs and the containers are told about a cluster's web UIs."""

import pytest
from django.core.management import call_command

from apps.catalog.models import ProductVersion
from apps.clusters import access
from apps.proxy.tests.upstream import cluster_on

pytestmark = pytest.mark.django_db


def test_web_uis_lists_every_declared_ui_of_the_placed_members(alice):
    cluster = cluster_on(alice, 8080, 4040)
    assert access.web_uis(cluster) == [
        {
            "name": "Master UI",
            "hostname": "master-0",
            "port": 8080,
            "url": f"/clusters/{cluster.id}/ui/master-0/8080/",
        },
        {
            "name": "App UI",
            "hostname": "master-0",
            "port": 4040,
            "url": f"/clusters/{cluster.id}/ui/master-0/4040/",
        },
        {
            "name": "Worker UI",
            "hostname": "worker-0",
            "port": 8081,
            "url": f"/clusters/{cluster.id}/ui/worker-0/8081/",
        },
    ]
    cluster.instances.update(active=False)
    assert access.web_uis(cluster) == []


def test_links_go_through_the_portal_whatever_the_ui_domain(alice, settings):
    # The portal path checks access and sends the browser on to the cluster's UI host; the
    # path is the same there, so containers are told a path, not a host.
    settings.UI_DOMAIN = "ui.example.org"
    cluster = cluster_on(alice, 8080, 4040)
    assert access.web_uis(cluster)[0]["url"] == f"/clusters/{cluster.id}/ui/master-0/8080/"
    master = cluster.instances.get(role="master")
    assert access.web_ui_environment(cluster, master) == {
        "PLATTER_WEB_UI_ROOT": f"/clusters/{cluster.id}/ui"
    }


def test_every_instance_learns_where_its_clusters_uis_are_served(alice):
    cluster = cluster_on(alice, 8080, 4040)
    for instance in cluster.instances.all():
        env = access.web_ui_environment(cluster, instance)
        assert env == {"PLATTER_WEB_UI_ROOT": f"/clusters/{cluster.id}/ui"}


def test_the_catalog_declares_the_products_web_uis():
    call_command("load_catalog", verbosity=0)
    uis = {
        (v.product.name, p["port"])
        for v in ProductVersion.objects.select_related("product")
        for p in v.ports
        if p.get("ui")
    }
    assert {("spark", 8080), ("spark", 4040), ("hadoop", 9870), ("hadoop", 8088)} <= uis
    assert ("spark", 7077) not in uis


def test_a_version_says_ui_with_true_or_false():
    from django.core.exceptions import ValidationError

    from apps.catalog.definition import validate_definition
    from apps.catalog.tests.factories import make_version

    validate_definition(
        make_version(ports=[{"role": "master", "port": 80, "name": "UI", "ui": True}])
    )
    with pytest.raises(ValidationError) as refused:
        validate_definition(
            make_version(ports=[{"role": "master", "port": 80, "name": "UI", "ui": "yes"}])
        )
    assert "ports[0].ui: must be true or false" in str(refused.value)
