"""Cassandra: nodes join the ring one at a time and leave it by nodetool decommission (seeds
never leave: they are a role of their own); no jobs."""

from ..base import BasePlugin, Member, Operator
from . import ring


class CassandraPlugin(BasePlugin):
    name = "cassandra"
    title = "Cassandra (ring joins and nodetool decommission)"
    resizable = ("node",)
    drain_words = (
        "each leaving node streams its data to the others (nodetool decommission), one at a "
        "time, newest first; a shrink below a keyspace's replication factor is refused"
    )

    def join(self, op: Operator, ids: set[int]) -> None:
        ring.join(op, ids)

    def drain(self, op: Operator, leaving: list[Member]) -> None:
        ring.drain(op, leaving)


PLUGIN = CassandraPlugin()
