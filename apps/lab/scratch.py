"""A portal of its own for a run that breaks things (the fault suite): its own state folder,
PostgreSQL and Redis on free ports, and a two-node lab on addresses and subnets no other lab of
this machine uses. No Django here: ./platter builds it before any settings load."""

import json
import os
import socket
from pathlib import Path


def scratch_environment(state: Path, slot: int) -> dict[str, str]:
    """The environment of a portal of its own under `state`: its own PostgreSQL and Redis on
    free ports, a two-node lab on addresses and subnets no other lab of this machine uses, and
    the periodic net's intervals short enough for the suite."""
    hidden = {
        "DATABASE_URL",
        "REDIS_URL",
        "PLATTER_SITE",
        "PLATTER_TEST_DB",
        "PLATTER_TEST_REDIS_DB",
    }
    env = {key: value for key, value in os.environ.items() if key not in hidden}
    ports = _ports(state)
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings.dev",
        PLATTER_STATE_DIR=str(state),
        PLATTER_POSTGRES_PORT=str(ports["postgres"]),
        PLATTER_REDIS_PORT=str(ports["redis"]),
        PLATTER_LAB_ADDRESS_PREFIX=f"127.0.{80 + slot}.",
        PLATTER_LAB_SEGMENTS_SUBNET=f"10.{240 + slot}.0.0/16",
        PLATTER_LAB_SEGMENTS_PER_SLOT="8",
        PLATTER_LAB_NODES="2",
        PLATTER_LAB_SSH_NODE="0",
        PLATTER_LAB_DISKS="4",
        PLATTER_LAB_SSD_PER_NODE="0",
        PLATTER_LAB_DISK_SIZE_MB="64",
        PLATTER_LAB_PRODUCTS="",
        PLATTER_STALL_SECONDS="15",
        PLATTER_ORPHAN_GRACE_SECONDS="5",
        PLATTER_NODE_DOWN_AFTER_FAILED_CHECKS="2",
        PLATTER_NODE_API_TIMEOUT="10",
        PLATTER_NODE_API_RETRIES="2",
        PLATTER_CLUSTER_LOCK_WAIT="5",
    )
    return env


def _ports(state: Path) -> dict[str, int]:
    """Free ports chosen once per state folder and kept in it, so a later `lab down` (or a
    run after an interrupted one) finds the same servers."""
    saved = state / "ports.json"
    if saved.exists():
        return json.loads(saved.read_text())
    ports = {"postgres": free_port(), "redis": free_port()}
    state.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(ports))
    return ports


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
