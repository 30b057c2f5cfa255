"""Clusters launched on fake nodes (apps/nodes/fake.py) through the real launch operation,
for the resize and notebook tests of the portal and of each product (apps/products/*/tests).
The fixtures they use (fake_nodes, pool, catalog) are the repository's (conftest.py)."""

from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.clusters import services
from apps.clusters.models import Cluster, Instance
from apps.clusters.reservation import reserve
from workers import operations


def version(product: str) -> ProductVersion:
    found = ProductVersion.objects.filter(product__name=product).order_by("id").first()
    assert found is not None, f"the catalog has {product}"
    return found


def running(owner, product: str, **options) -> Cluster:
    """A cluster of the catalog's `product` launched on fake nodes, running."""
    spec = resolve(version(product), options)
    cluster = services.create_cluster(
        owner, version(product), f"c{Cluster.objects.count()}", spec.instances, options
    )
    reserve(cluster.id)
    assert operations.run("launch", cluster.id) == Cluster.State.RUNNING
    cluster.refresh_from_db()
    return cluster


def workers_of(cluster: Cluster, role: str = "worker") -> list[Instance]:
    return list(cluster.instances.filter(role=role, active=True).order_by("index"))
