"""Against the real thing: a worker and the lab's Docker nodes."""

import pytest

from apps.audit.models import AuditEvent
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Node
from workers import reconciler

from .conftest import USER_ADDRESS, bearer, events_of, only_event

A = AuditEvent.Action


@pytest.mark.django_db(transaction=True)
def test_a_cluster_launched_and_destroyed_on_the_lab_has_both_rows(dispatching, lab_cleanup, alice):
    load_catalog()
    api = bearer(alice)
    launched = api.post(
        "/api/v1/products/demo/1.0", {"size": 1, "disks": 1, "name": "lab-audit"}, format="json"
    )
    assert launched.status_code == 202, launched.content
    cluster_id = launched.json()["id"]
    running = wait_for(cluster_id, Cluster.State.RUNNING, Cluster.State.FAILED, seconds=120)
    assert running.state == Cluster.State.RUNNING, running.reason

    assert api.delete(f"/api/v1/clusters/{cluster_id}?keep_data=false").status_code == 202
    wait_for(cluster_id, Cluster.State.DESTROYED, seconds=120)

    # The worker's own steps (placing, configuring, removing containers) are cluster events,
    # not audit rows: the log holds what people asked for.
    assert events_of(running) == [A.CLUSTER_LAUNCH, A.CLUSTER_DESTROY]
    launch = only_event(A.CLUSTER_LAUNCH, object_id=cluster_id)
    destroy = only_event(A.CLUSTER_DESTROY, object_id=cluster_id)
    for event in (launch, destroy):
        assert (event.actor, event.client_address) == (alice, USER_ADDRESS)
        assert event.object_repr == "lab-audit of alice"
    assert destroy.detail == {"keep_data": False}


@pytest.mark.django_db
def test_the_reconciler_records_a_node_going_down_and_coming_back_as_the_system(
    lab_inventory, settings
):
    silent = Node.objects.create(
        name="audit-silent", endpoint="unix:///nonexistent/docker.sock", cores=4, memory_mb=4096
    )
    back = lab_inventory[0]
    Node.objects.filter(id=back.id).update(state=Node.State.DOWN, down_by_health_check=True)

    reports = [reconciler.reconcile() for _ in range(settings.NODE_DOWN_AFTER_FAILED_CHECKS)]
    assert back.name in reports[0]["back_up"] and silent.name in reports[-1]["marked_down"]

    down = only_event(A.NODE_DOWN, object_id=silent.id)
    assert (down.actor, down.actor_name, down.object_repr) == (None, "", "audit-silent")
    assert down.detail["previous"] == "active"
    assert down.detail["reason"].startswith("does not answer health checks")
    up = only_event(A.NODE_ACTIVATE, object_id=back.id)
    assert up.actor is None and up.detail == {
        "previous": "down",
        "reason": "answers health checks again",
    }
