"""Revisions: a cluster keeps the definition it launched with, whatever the version says now."""

import pytest
from django.db.models import ProtectedError

from apps.catalog.models import ProductRevision, ProductVersion
from apps.catalog.options import resolve
from apps.catalog.revisions import current_revision, revision_diff, snapshot
from apps.catalog.services import load_catalog
from apps.clusters import container_specs
from apps.clusters.models import Cluster
from apps.clusters.services import create_cluster
from apps.clusters.tests.factories import make_network, make_node
from apps.clusters.tests.parallel import run_together
from apps.inventory.models import Address

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db) -> ProductVersion:
    load_catalog()
    return ProductVersion.objects.get(product__name="demo")


def launch(owner, version: ProductVersion, name: str) -> Cluster:
    spec = resolve(version, {"size": 1})
    return create_cluster(owner, version, name, spec.instances, {"size": 1})


def placed(cluster: Cluster) -> Cluster:
    """Its instances on a node with addresses, as a placement leaves them."""
    node, network = make_node(), make_network()
    free = iter(Address.objects.filter(network=network).order_by("id"))
    for instance in cluster.instances.all():
        instance.node, instance.address, instance.active = node, next(free), True
        instance.save(update_fields=["node", "address", "active"])
    return Cluster.objects.select_related("revision", "version__product").get(id=cluster.id)


def edit(version: ProductVersion) -> None:
    """An admin's kind of edit: a role's command and the environment change."""
    version.roles[0]["command"] = ["sh", "-c", "echo edited && exec sleep 1d"]
    version.environment = {**version.environment, "EDITED": "yes"}
    version.save()


def test_it_records_revision_1_at_the_first_launch(demo, alice):
    cluster = launch(alice, demo, "first")
    assert cluster.revision.number == 1
    assert cluster.revision.definition == snapshot(demo)
    assert cluster.revision.created_by is None  # a launch authors no definition


def test_an_unchanged_version_makes_no_new_revision(demo, alice):
    one = launch(alice, demo, "one")
    demo.description = "only the description changed"
    demo.enabled = True
    demo.save()
    two = launch(alice, demo, "two")
    assert two.revision_id == one.revision_id
    assert current_revision(demo) == one.revision
    assert demo.revisions.count() == 1


def test_an_edit_after_a_launch_makes_revision_2_and_the_cluster_keeps_1(demo, alice):
    cluster = placed(launch(alice, demo, "kept"))
    before = {
        p.name: (p.command, p.environment, p.fingerprint())
        for p in container_specs.plans_for(cluster)
    }

    edit(demo)
    later = launch(alice, demo, "later")

    assert later.revision.number == 2 and later.revision.definition == snapshot(demo)
    fresh = Cluster.objects.select_related("revision", "version__product").get(id=cluster.id)
    assert fresh.revision.number == 1
    # What a start, a resume or a re-placement builds is the launched spec, to the fingerprint.
    after = {
        p.name: (p.command, p.environment, p.fingerprint())
        for p in container_specs.plans_for(fresh)
    }
    assert after == before
    assert all("EDITED" not in env for _command, env, _fp in after.values())
    assert "edited" not in " ".join(c for command, _e, _f in after.values() for c in command)
    # ...and a cluster launched after the edit gets the edit.
    new_plans = container_specs.plans_for(placed(later))
    assert all(p.environment["EDITED"] == "yes" for p in new_plans)


def test_trust_taken_back_still_stops_a_cluster_of_an_older_revision(demo, alice):
    demo.capabilities = ["NET_ADMIN"]
    demo.trusted = True
    demo.save()
    cluster = placed(launch(alice, demo, "trusted"))
    assert len(container_specs.plans_for(cluster)) == 2
    ProductVersion.objects.filter(id=demo.id).update(trusted=False, capabilities=[])
    fresh = Cluster.objects.select_related("revision", "version__product").get(id=cluster.id)
    with pytest.raises(container_specs.UntrustedVersion, match="NET_ADMIN"):
        container_specs.plans_for(fresh)


def test_a_revision_refuses_an_update_and_a_delete_while_a_cluster_uses_it(demo, alice):
    revision = launch(alice, demo, "frozen").revision
    revision.definition = {**revision.definition, "image": "evil:1"}
    with pytest.raises(ValueError, match="immutable"):
        revision.save()
    with pytest.raises(ProtectedError):
        revision.delete()
    revision.refresh_from_db()
    assert revision.definition["image"] == "platter/lab-base:1"


def test_the_frozen_definition_refuses_a_save_that_would_overwrite_the_version(demo, alice):
    cluster = launch(alice, demo, "frozen")
    edit(demo)
    frozen = Cluster.objects.get(id=cluster.id).definition
    assert frozen.environment.get("EDITED") is None and frozen.trusted == demo.trusted
    with pytest.raises(ValueError, match="frozen revision"):
        frozen.save()
    demo.refresh_from_db()
    assert demo.environment["EDITED"] == "yes"


def test_the_diff_names_what_changed(demo, alice):
    one = current_revision(demo)
    edit(demo)
    two = current_revision(demo, alice)
    assert two.number == 2 and two.created_by == alice
    diff = revision_diff(one, two)
    assert diff.startswith("--- revision 1\n+++ revision 2\n")
    assert '+    "EDITED": "yes"' in diff
    added = [line for line in diff.splitlines() if line.startswith("+")]
    assert any('"echo edited && exec sleep 1d"' in line for line in added)
    assert '-    "image"' not in diff  # unchanged fields are context, not changes
    assert revision_diff(None, one).startswith("--- (none)\n+++ revision 1\n")


@pytest.mark.django_db(transaction=True)
def test_two_parallel_launches_make_one_revision(demo, alice, bob):
    assert not demo.revisions.exists()  # both launches would make revision 1
    results = run_together(
        [lambda: launch(alice, demo, "left").id, lambda: launch(bob, demo, "right").id]
    )
    assert all(isinstance(r, int) for r in results), results
    clusters = Cluster.objects.filter(id__in=results)
    assert {c.revision_id for c in clusters} == {ProductRevision.objects.get().id}
    assert ProductRevision.objects.get().definition == snapshot(demo)
