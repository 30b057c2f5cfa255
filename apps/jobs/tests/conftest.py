"""Jobs test fixtures: the API personas (apps/api/tests/conftest.py) and clusters of a
product, as rows in the state a test needs (no containers: the node layer is faked)."""

import itertools

import pytest

from apps.api.tests.conftest import api, throttle_cache, tokens  # noqa: F401 (fixtures)
from apps.catalog.models import Product, ProductVersion
from apps.clusters.models import Cluster, Instance
from apps.inventory.models import Node
from apps.products import registry

_names = itertools.count(1)


def make_cluster(owner, product: str = "spark", state: str = "running") -> Cluster:
    """A cluster of `product` with a master on a (fake) node; its version names the plugin
    of the same name (the generic one when there is none)."""
    found, _ = Product.objects.get_or_create(name=product, defaults={"title": product})
    plugin = product if product in registry.PLUGINS else ""
    version, _ = ProductVersion.objects.get_or_create(
        product=found, version="t", defaults={"image": f"platter/{product}:t", "plugin": plugin}
    )
    cluster = Cluster.objects.create(
        owner=owner, version=version, name=f"{product}-{next(_names)}", state=state
    )
    node, _ = Node.objects.get_or_create(
        name="lab-1", defaults={"endpoint": "unix:///x", "cores": 8, "memory_mb": 8192}
    )
    Instance.objects.create(
        cluster=cluster,
        role="master",
        index=0,
        hostname="master-0",
        cores=1,
        memory_mb=1024,
        disks=0,
        node=node,
        active=True,
        container_id="c-master",
    )
    return cluster


@pytest.fixture
def spark(alice) -> Cluster:
    return make_cluster(alice, "spark")


@pytest.fixture
def hadoop(alice) -> Cluster:
    return make_cluster(alice, "hadoop")
