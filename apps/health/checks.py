"""Health of the portal's dependencies: database, Redis and every node's Docker API."""

from concurrent.futures import ThreadPoolExecutor
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


def check_redis() -> Check:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
        return Check("redis", True)
    except Exception as exc:  # noqa: BLE001 (a health check reports any failure)
        return Check("redis", False, str(exc))


def check_node(node: Node) -> Check:
    try:
        nodes.client(node).ping()
        return Check(f"node:{node.name}", True, node.endpoint)
    except Exception as exc:  # noqa: BLE001 (a health check reports any failure)
        nodes.client(node).forget()
        return Check(f"node:{node.name}", False, f"{node.endpoint}: {exc}")


def run_all() -> list[Check]:
    checks = [check_database(), check_redis()]
    if checks[0].ok:
        nodes = list(Node.objects.exclude(state=Node.State.MAINTENANCE))
        # Nodes answer in parallel so one slow node does not add up with the others.
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
            checks += list(pool.map(check_node, nodes))
    return checks
