"""FerretDB (the mongodb product's FerretDB version) offers no resize: refused before
anything changes."""

import pytest

from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.resize import ResizeRefused

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def test_ferretdb_cannot_be_resized(fake_nodes, pool, alice, catalog):
    ferret = ProductVersion.objects.get(product__name="mongodb", version__startswith="ferretdb")
    spec = resolve(ferret, {"size": 1})
    cluster = services.create_cluster(alice, ferret, "ferret", spec.instances, {"size": 1})
    Cluster.objects.filter(id=cluster.id).update(state=S.RUNNING)
    with pytest.raises(ResizeRefused, match="cannot be resized"):
        services.request_resize(cluster.id, 2, actor=alice)
