"""Node health and capacity. Capacity that comes back wakes the admission queue at once, not
at the next periodic pass: a node activated again (by an admin or by its health checks) and a
disk made available. Health checks write node state under the admin's row lock."""

import pytest

from apps.clusters.tests.factories import make_node
from apps.inventory.models import Disk, Node
from apps.inventory.services import record_health_check, set_disk_state, set_node_state

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(settings, monkeypatch):
    from portal.celery import app

    settings.DISPATCH_CLUSTER_TASKS = True
    names: list[str] = []
    monkeypatch.setattr(app, "send_task", lambda name, **kwargs: names.append(name))
    return names


def test_a_node_made_active_again_wakes_the_queue(sent):
    node = make_node(state="draining")
    set_node_state(node.id, Node.State.MAINTENANCE)
    assert sent == []
    set_node_state(node.id, Node.State.ACTIVE)
    assert sent == ["platter.admit_queued"]


def test_a_node_back_from_failed_health_checks_wakes_the_queue(sent, settings):
    settings.NODE_DOWN_AFTER_FAILED_CHECKS = 1
    node = make_node()
    assert record_health_check(node.id, error="connection refused") == "down"
    assert sent == []
    assert record_health_check(node.id, images=[]) == "up"
    assert sent == ["platter.admit_queued"]


def test_a_disk_made_available_wakes_the_queue(sent):
    node = make_node(disks={"hdd": 1})
    disk = node.disks.get()
    set_disk_state([disk.id], Disk.State.FAILED)
    assert sent == []
    set_disk_state([disk.id], Disk.State.AVAILABLE)
    assert sent == ["platter.admit_queued"]


def test_a_health_check_waits_for_an_admins_change_and_never_overwrites_it(settings):
    """The reconciler's write takes the node row lock set_node_state takes: an admin putting
    the node in maintenance while a failed check comes in keeps the node in maintenance."""
    import threading
    import time

    from django.db import connection, transaction

    settings.NODE_DOWN_AFTER_FAILED_CHECKS = 1
    node = make_node()
    locked, done = threading.Event(), threading.Event()

    def admin() -> None:
        try:
            with transaction.atomic():
                set_node_state(node.id, Node.State.MAINTENANCE)
                locked.set()
                time.sleep(1)  # the health check arrives meanwhile
        finally:
            connection.close()

    def check() -> None:
        try:
            locked.wait(10)
            record_health_check(node.id, error="connection refused")
            done.set()
        finally:
            connection.close()

    threads = [threading.Thread(target=admin), threading.Thread(target=check)]
    for thread in threads:
        thread.start()
    assert not done.wait(0.5)  # blocked on the admin's row lock
    for thread in threads:
        thread.join(20)
    node.refresh_from_db()
    assert node.state == Node.State.MAINTENANCE and node.failed_checks == 1
    assert not node.down_by_health_check
