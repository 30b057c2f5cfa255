"""Kafka (KRaft): brokers join by starting (each registers with the controller quorum
itself, and the product's check waits until every one is registered) and leave once their
partition replicas moved to the brokers that stay. Controllers (combined broker and quorum
voter) are a role of their own that never resizes, so the quorum never changes. No jobs. Its
signal of use is a client connected to 9092 from outside the cluster, which the connection
probe every product has already counts (workers/idle.py): no probe of its own."""

from ..base import BasePlugin, Member, Operator
from . import reassign
from .rules import BROKER


class KafkaPlugin(BasePlugin):
    name = "kafka"
    title = "Kafka (partition reassignment before a broker leaves)"
    resizable = (BROKER,)
    drain_words = (
        "the leaving brokers' partition replicas move to the brokers that stay (Kafka's "
        "partition reassignment), then they stop; a shrink below a topic's replication "
        "factor is refused"
    )

    def drain(self, op: Operator, leaving: list[Member]) -> None:
        reassign.drain(op, leaving)


PLUGIN = KafkaPlugin()
