"""Cassandra's rules of a shrink, plain functions (no node calls): the copies a keyspace keeps
and whether a ring may shrink to a number of nodes."""

# Cassandra's own keyspaces that Platter replicates to the ring's size (system_auth to
# min(3, nodes) by cassandra-auth): a shrink lowers them rather than being refused by them
# (Cassandra's decommission itself refuses to leave fewer nodes than any keyspace's copies).
OWN_KEYSPACES = ("system_auth", "system_distributed", "system_traces")


def replication_factor(replication: dict[str, str]) -> int:
    """The copies a keyspace keeps, from its replication map in system_schema.keyspaces:
    SimpleStrategy's replication_factor, NetworkTopologyStrategy's largest per-datacenter
    count (a Platter ring is one datacenter); 0 for LocalStrategy (each node's own)."""
    strategy = str(replication.get("class", "")).rsplit(".", 1)[-1]
    if strategy == "SimpleStrategy":
        return _copies(replication.get("replication_factor", "1"))
    if strategy == "NetworkTopologyStrategy":
        return max((_copies(v) for k, v in replication.items() if k != "class"), default=0)
    return 0


def _copies(value: object) -> int:
    # "3", or "3/1" with transient replicas: every replica needs a node.
    return int(str(value).split("/", 1)[0])


def ring_shrink_refusal(factors: dict[str, int], staying: int) -> str | None:
    """Why a Cassandra ring cannot shrink to `staying` nodes (seeds included), or None: a
    keyspace keeping more copies than nodes would stay (the one keeping the most is named).
    Cassandra's own keyspaces do not count: the drain lowers them to the nodes that stay."""
    over = {
        name: copies
        for name, copies in factors.items()
        if copies > staying and name not in OWN_KEYSPACES
    }
    if not over:
        return None
    name = min(over, key=lambda k: (-over[k], k))
    copies = over[name]
    return (
        f"keyspace {name} has replication factor {copies}: at least {copies} Cassandra nodes "
        f"(seeds included) must stay, and this shrink would leave {staying}; lower its "
        "replication (ALTER KEYSPACE) or keep more nodes"
    )
