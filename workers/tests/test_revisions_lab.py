"""On the real lab, with a real worker: an admin's edit of a version between a stop and a start
leaves a cluster's containers as they launched (issue 19). Before revisions, the start rebuilt
the containers from the edited version and so replaced them with the new command and
environment."""

import pytest
from django.core.management import call_command

from apps.catalog.models import ProductVersion
from apps.catalog.revisions import current_revision
from apps.clusters import services
from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.waiting import wait_for
from apps.nodes import engine
from workers.tests.lab_products import READY_SECONDS, launch_default

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def container_of(instance: Instance) -> dict:
    instance.refresh_from_db()
    assert instance.node is not None, "placed on a node"
    return engine.cached(instance.node).api.inspect_container(instance.container_id)


def environment(info: dict) -> dict[str, str]:
    return dict(item.split("=", 1) for item in info["Config"]["Env"])


def edit_role(version: ProductVersion, role: str) -> None:
    """What an admin may do in the version's admin page: every variable of the role changed,
    one added, and a shell command run through one more echo (the product still works)."""
    for definition in version.roles:
        if definition["name"] != role:
            continue
        variables = definition.get("environment", {})
        definition["environment"] = {
            **{name: f"{value}-edited" for name, value in variables.items()},
            "PLATTER_EDITED": "edited",
        }
        command = definition.get("command", [])
        if command[:2] == ["sh", "-c"]:
            definition["command"] = ["sh", "-c", "echo edited; " + command[2]]
    version.save()
    current_revision(version)  # as the admin's save does


def stop_edit_start(cluster: Cluster, role: str) -> tuple[Instance, dict, dict]:
    instance = cluster.instances.select_related("node").filter(role=role, active=True).first()
    assert instance is not None, f"no {role} instance"
    before = container_of(instance)
    services.request_stop(cluster.id)
    wait_for(cluster.id, S.STOPPED, seconds=120)
    edit_role(cluster.version, role)
    services.request_start(cluster.id)
    wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)
    return instance, before, container_of(instance)


def assert_kept(cluster: Cluster, instance: Instance, before: dict, after: dict) -> None:
    cluster.refresh_from_db()
    assert cluster.revision is not None and cluster.revision.number == 1
    assert cluster.version.revisions.count() == 2  # the edit made revision 2
    assert after["State"]["Running"] is True
    assert "PLATTER_EDITED" not in environment(after)
    assert environment(after) == environment(before)
    assert after["Config"]["Cmd"] == before["Config"]["Cmd"]
    # The very same container: its fingerprint (the spec) did not change.
    assert after["Id"] == before["Id"] == instance.container_id


def test_a_demo_cluster_restarts_with_its_launched_spec_after_an_edit(
    dispatching, lab_cleanup, alice
):
    call_command("load_catalog", verbosity=0)
    demo = ProductVersion.objects.get(product__name="demo")
    cluster = services.launch(alice, demo, "kept-spec", {"size": 1})
    cluster = wait_for(cluster.id, S.RUNNING)
    assert cluster.revision.number == 1
    instance, before, after = stop_edit_start(cluster, "worker")
    assert_kept(cluster, instance, before, after)
    assert "PLATTER_MEMBERS" in environment(after)  # the product's own variables are there
    assert not after["Config"]["Cmd"][-1].startswith("echo edited")

    # A cluster launched now gets the edit.
    edited = services.launch(alice, ProductVersion.objects.get(id=demo.id), "edited", {"size": 1})
    edited = wait_for(edited.id, S.RUNNING)
    assert edited.revision.number == 2
    worker = edited.instances.select_related("node").get(role="worker")
    info = container_of(worker)
    assert environment(info)["PLATTER_EDITED"] == "edited"
    assert info["Config"]["Cmd"][-1].startswith("echo edited; ")


def test_a_spark_cluster_restarts_with_its_launched_spec_after_an_edit(
    dispatching, lab_cleanup, alice
):
    cluster = launch_default(alice, "spark", "kept-spark")
    instance, before, after = stop_edit_start(cluster, "worker")
    assert_kept(cluster, instance, before, after)
    assert environment(after)["SPARK_DAEMON_MEMORY"] == "256m"  # not 256m-edited
