"""Health of the portal's dependencies: database and Redis (the broker), and every node's
Docker API (probed by `manage.py doctor` only; /healthz reads the reconciler's survey)."""

from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import connection

from apps import nodes
from apps.inventory.models import Node


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Check("database", True)
    except Exception as exc:  # noqa: BLE001 (a health check reports any failure)
        return Check("database", False, str(exc))


def check_redis(url: str | None = None) -> Check:
    try:
        redis.Redis.from_url(
            url or settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2
        ).ping()
        return Check("redis", True)
    except Exception as exc:  # noqa: BLE001 (a health check reports any failure)
        return Check("redis", False, str(exc))


def check_broker() -> Check:
    """The broker the portal hands cluster work to (Redis)."""
    found = check_redis(settings.CELERY_BROKER_URL)
    return Check("broker", found.ok, found.detail)


def check_node(node: Node) -> Check:
    try:
        nodes.client(node).ping()
        return Check(f"node:{node.name}", True, node.endpoint)
    except Exception as exc:  # noqa: BLE001 (a health check reports any failure)
        nodes.client(node).forget()
        return Check(f"node:{node.name}", False, f"{node.endpoint}: {exc}")


def portal_checks() -> list[Check]:
    """What the portal itself needs to serve: its database and its broker."""
    return [check_database(), check_broker()]


def node_health() -> dict[str, dict]:
    """Each node as the reconciler last saw it (it checks every node every 30 s): no probe
    here, so a request never waits on a node, and no endpoint in the answer."""
    nodes = Node.objects.exclude(state=Node.State.MAINTENANCE).order_by("name")
    return {
        node.name: {
            "ok": node.state != Node.State.DOWN and node.failed_checks == 0,
            "state": node.state,
            "failed_checks": node.failed_checks,
            "last_seen": node.last_seen.isoformat() if node.last_seen else None,
        }
        for node in nodes.only("name", "state", "failed_checks", "last_seen")
    }
