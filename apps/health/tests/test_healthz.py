"""/healthz: whether the portal itself is up (its database and its broker) for anyone, as a
load balancer asks it; the nodes' health, as the reconciler last saw it, for staff only. No
request probes a node, and no answer names a node's endpoint."""

import select
import socket
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.inventory.models import Node


@pytest.fixture
def listening():
    """A TCP port that only counts: a node whose endpoint is here gets no connection unless
    someone probes it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


def probed(server: socket.socket) -> bool:
    return bool(select.select([server], [], [], 0.5)[0])


@pytest.fixture
def nodes(db, listening):
    port = listening.getsockname()[1]
    healthy = Node.objects.create(
        name="good",
        endpoint=f"tcp://127.0.0.1:{port}",
        cores=1,
        memory_mb=1024,
        last_seen=timezone.now(),
    )
    dead = Node.objects.create(
        name="dead",
        endpoint=f"tcp://127.0.0.1:{port}",
        cores=1,
        memory_mb=1024,
        state=Node.State.DOWN,
        failed_checks=3,
        last_seen=timezone.now() - timedelta(hours=1),
    )
    return healthy, dead


def test_anyone_gets_up_or_down_of_the_portal_only(client, nodes, listening):
    response = client.get(reverse("healthz"))
    body = response.json()
    assert response.status_code == 200, body
    assert body == {"status": "ok", "checks": {"database": {"ok": True}, "broker": {"ok": True}}}
    assert "127.0.0.1" not in response.content.decode()
    assert not probed(listening)


def test_a_dead_node_does_not_make_the_portal_unhealthy(client, nodes):
    assert client.get(reverse("healthz")).status_code == 200


def test_staff_see_each_node_as_the_reconciler_last_saw_it(client, admin_user, nodes, listening):
    client.force_login(admin_user)
    response = client.get(reverse("healthz"))
    body = response.json()
    assert response.status_code == 200
    good, dead = body["nodes"]["good"], body["nodes"]["dead"]
    assert good["ok"] is True and good["state"] == "active" and good["failed_checks"] == 0
    assert dead["ok"] is False and dead["state"] == "down" and dead["failed_checks"] == 3
    assert dead["last_seen"] and dead["last_seen"] < good["last_seen"]
    assert "127.0.0.1" not in response.content.decode() and "endpoint" not in good
    assert not probed(listening)


def test_a_user_who_is_not_staff_sees_no_nodes(client, alice, nodes):
    client.force_login(alice)
    assert "nodes" not in client.get(reverse("healthz")).json()


@pytest.mark.django_db
def test_it_fails_when_the_broker_does_not_answer_without_saying_where(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response.json() == {
        "status": "failing",
        "checks": {"database": {"ok": True}, "broker": {"ok": False}},
    }


@pytest.mark.django_db
def test_staff_are_told_why_the_broker_fails(client, admin_user, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    client.force_login(admin_user)
    broker = client.get(reverse("healthz")).json()["checks"]["broker"]
    assert broker["ok"] is False and broker["detail"]


def test_it_needs_no_login_and_is_never_cached(client, db):
    response = client.get(reverse("healthz"))
    assert response.status_code == 200 and "no-cache" in response["Cache-Control"]
