"""On the real lab: a cluster whose version needs trust it no longer has never reaches Docker;
the launch fails with a reason an admin can act on and holds nothing. (What a launched
container gets is inspected in workers/tests/test_lifecycle.py.)"""

import pytest
from django.conf import settings
from django.core.management import call_command

from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation
from apps.nodes import engine
from workers import operations

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_queued_cluster_of_a_version_no_longer_trusted_is_refused_before_docker(
    alice, lab_cleanup
):
    call_command("load_catalog", verbosity=0)
    version = ProductVersion.objects.get(product__name="demo")
    version.capabilities = ["NET_RAW", "NET_ADMIN"]
    version.trusted = True
    version.save()
    cluster = services.launch(alice, version, "was-trusted", {"size": 1})
    ProductVersion.objects.filter(pk=version.pk).update(trusted=False)  # an admin took it back

    assert operations.run("launch", cluster.id) == Cluster.State.FAILED
    cluster.refresh_from_db()
    assert "must mark it trusted" in cluster.reason and "NET_ADMIN" in cluster.reason
    events = [event.message for event in cluster.events.all()]
    assert any(message.startswith("reserved") for message in events)  # it got that far
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()
    for node in lab_cleanup:
        made = engine.cached(node).containers.list(
            all=True,
            filters={
                "label": [f"platter.site={settings.PLATTER_SITE}", f"platter.cluster={cluster.id}"]
            },
        )
        assert made == [], node.name
