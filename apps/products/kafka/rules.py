"""Kafka's rules of a shrink, plain functions (no node calls): which broker id an instance
runs as, and whether the brokers may shrink to a number of them."""

from typing import Any

from ..base import Member

# The catalog's roles (apps/products/kafka/catalog.json): combined broker + quorum voter, and
# broker only. kafka-start gives them these node ids; keep the two in step.
CONTROLLER = "controller"
BROKER = "broker"
BROKER_IDS_FROM = 100


def broker_id(member: Member) -> int:
    """The node id kafka-start gives the instance: a controller's index + 1, a broker's
    100 + index (so a broker added later never takes a voter's id)."""
    if member.role == CONTROLLER:
        return member.index + 1
    return BROKER_IDS_FROM + member.index


def shrink_refusal(topics: list[dict[str, Any]], staying: int) -> str | None:
    """Why the brokers cannot shrink to `staying` (controllers included), or None: a topic
    with more replicas than brokers would stay (the one with the most is named)."""
    over = {
        str(t["name"]): int(t["replication_factor"])
        for t in topics
        if int(t["replication_factor"]) > staying
    }
    if not over:
        return None
    name = min(over, key=lambda k: (-over[k], k))
    factor = over[name]
    return (
        f"topic {name} has replication factor {factor}: at least {factor} Kafka brokers "
        f"(controllers included) must stay, and this shrink would leave {staying}; lower its "
        "replication (kafka reassign-partitions) or keep more brokers"
    )
