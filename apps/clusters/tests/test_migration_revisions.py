"""Migration 0008: clusters made before revisions existed get one of their version's
definition, one revision per version, shared by its clusters."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.catalog.models import ProductVersion
from apps.catalog.revisions import snapshot
from apps.clusters.models import Cluster

BEFORE = [("catalog", "0001_initial"), ("clusters", "0007_cluster_unique_name")]


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_older_clusters_get_revision_1_of_their_versions_definition(alice):
    old = migrate(BEFORE).loader.project_state(BEFORE).apps
    product = old.get_model("catalog", "Product").objects.create(name="p", title="P")
    versions = old.get_model("catalog", "ProductVersion").objects
    used = versions.create(product=product, version="1", image="a:1", environment={"X": "1"})
    versions.create(product=product, version="2", image="b:1")  # no cluster: no revision
    clusters = old.get_model("clusters", "Cluster").objects
    for name in ("one", "two"):
        clusters.create(owner_id=alice.id, version_id=used.id, name=name)

    executor = MigrationExecutor(connection)
    migrate(executor.loader.graph.leaf_nodes())

    migrated = list(Cluster.objects.select_related("revision", "version"))
    assert len(migrated) == 2
    assert {c.revision_id for c in migrated} == {migrated[0].version.revisions.get().id}
    revision = migrated[0].revision
    assert revision.number == 1 and revision.created_by is None
    assert revision.definition == snapshot(migrated[0].version)
    assert revision.definition["environment"] == {"X": "1"}
    assert migrated[0].definition.image == "a:1"
    assert not ProductVersion.objects.get(version="2").revisions.exists()
