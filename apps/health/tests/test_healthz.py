import pytest
from django.urls import reverse

from apps.inventory.models import Node


def test_it_is_healthy_when_database_redis_and_every_lab_node_answer(client, lab_inventory):
    response = client.get(reverse("healthz"))
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]
    for node in lab_inventory:
        assert body["checks"][f"node:{node.name}"]["ok"] is True


@pytest.mark.django_db
def test_it_fails_and_names_a_node_that_does_not_answer(client, settings, tmp_path):
    settings.NODE_API_TIMEOUT = 2
    # A loopback address where nothing listens: the node is down.
    Node.objects.create(
        name="ghost",
        endpoint="tcp://127.0.1.250:2376",
        tls_dir=str(tmp_path),
        cores=1,
        memory_mb=1024,
    )
    response = client.get(reverse("healthz"))
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "failing"
    assert body["checks"]["node:ghost"]["ok"] is False
    assert "tcp://127.0.1.250:2376" in body["checks"]["node:ghost"]["detail"]


@pytest.mark.django_db
def test_it_fails_when_redis_does_not_answer(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response.json()["checks"]["redis"]["ok"] is False


def test_it_needs_no_login(client, db):
    assert client.get(reverse("healthz")).status_code in {200, 503}
