"""Every shape the real catalog's options allow reserves and is admitted: the smallest, the
default and the largest launch of each version, through the launch service, the quota check,
the reservation and the admission queue (nodes are rows; the lab tests run real products)."""

import pytest

from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.catalog.options import option_definitions, targeted_roles
from apps.catalog.tests.rows import catalog_rows
from apps.clusters import services
from apps.clusters.admission import admit_queued
from apps.clusters.models import Cluster, DiskAllocation
from apps.clusters.reservation import release
from apps.inventory.models import Address

from .factories import make_network, make_nodes

pytestmark = pytest.mark.django_db


def shape(version: ProductVersion, end: str) -> dict:
    """Options at the smallest or largest value each allows (every role it sets agreeing)."""
    options = {}
    for name, definition in option_definitions(version).items():
        if definition["type"] == "bool" and definition.get("sets"):
            options[name] = end == "max"  # e.g. Spark's notebook: one more instance when on
            continue
        if definition["type"] != "int" or not definition.get("sets"):
            continue
        bounds = [
            role_bound
            for role in targeted_roles(version, definition)
            for role_bound in [_bound(role, definition["sets"], end)]
        ]
        if end == "min":
            options[name] = max([definition.get("min", 0), *bounds])
        else:
            options[name] = min([definition.get("max", 10**6), *bounds])
    return options


def _bound(role: dict, prop: str, end: str) -> int:
    from apps.catalog.options import role_resource

    return role_resource(role, prop)[end]


def catalog_shapes() -> list[tuple[str, str, str]]:
    from apps.catalog.services import default_catalog

    return [
        (product["name"], version["version"], end)
        for product in default_catalog()
        for version in product["versions"]
        for end in ("min", "default", "max")
    ]


@pytest.mark.parametrize(("product", "version", "end"), catalog_shapes())
def test_it_places_every_shape_of_the_catalog(alice, product, version, end):
    catalog_rows()  # load_catalog()'s rows, loaded once per process
    make_network(size=250)
    # Big enough for any version's largest shape on distinct nodes.
    make_nodes(40, cores=64, memory_mb=1 << 20, disks={"hdd": 16, "ssd": 16, "nvme": 16})
    Quota.objects.create(user=alice)  # no limits: the catalog's own bounds are under test
    chosen = ProductVersion.objects.get(product__name=product, version=version)
    options = {} if end == "default" else shape(chosen, end)

    cluster = services.launch(alice, chosen, f"{product}-{end}", options)
    assert admit_queued() == [cluster.id]

    cluster.refresh_from_db()
    assert cluster.state == Cluster.State.PLACING, cluster.reason
    for instance in cluster.instances.all():
        held = DiskAllocation.objects.filter(instance=instance, active=True).count()
        assert held == instance.disks, f"{instance.role}-{instance.index}"
        assert instance.address_id is not None and instance.node_id is not None
    # A role is there at its end's count: a role of none by default (Spark's notebook) only
    # in the largest shape.
    at_end = {"min": "min", "default": "default", "max": "max"}[end]
    assert {i.role for i in cluster.instances.all()} >= {
        role["name"] for role in chosen.roles if role.get(at_end, 1) > 0
    }
    release(cluster.id)
    assert not DiskAllocation.objects.filter(active=True).exists()
    assert not Address.objects.filter(held=True).exists()
