"""Cassandra on the real lab, launched as a user does: it writes at QUORUM and reads from another
node; it grows by a node that bootstraps (UJ, then UN; the older nodes clean up) and shrinks
back by nodetool decommission (cassandra-admin), every row written at RF 2 read back at
QUORUM, and a shrink below RF 2 is refused."""

import json
import re

import pytest

from apps.clusters import credentials, services
from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.waiting import wait_for
from workers.tests.lab_products import (
    assert_no_secret_shown,
    attempt,
    destroy_and_check,
    instance,
    launch_default,
    launched,
    mapped_archives,
    resized,
    run,
    shown_string,
)

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def test_cassandra_writes_at_quorum_and_reads_from_another_node(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "cassandra", "cassandra-smoke")
    seed, node = instance(cluster, "seed"), instance(cluster, "node")
    assert mapped_archives(seed) == mapped_archives(node) == {"cassandra.jsa"}
    output = run(seed, "/opt/platter/bin/cassandra-smoke", seed.hostname, node.hostname)
    assert "OK: a row written at QUORUM" in output

    # The cqlsh line the page shows logs in as the owner's superuser role; the default
    # superuser is locked out, and a session without credentials is refused on every node.
    cqlsh = shown_string(cluster, "cqlsh")
    roles = run(node, *cqlsh, "--credentials", "/dev/null", "-e", "LIST ROLES")
    owner = credentials.credentials_of(cluster).username
    assert any(
        line.split("|")[0].strip() == owner and "True" in line for line in roles.splitlines()
    ), roles
    for member in (seed, node):
        code, output = attempt(
            member,
            "cqlsh",
            "--credentials",
            "/dev/null",
            member.hostname,
            "9042",
            "-e",
            "DESCRIBE KEYSPACES",
        )
        assert code != 0 and "requires authentication" in output, output
    code, output = attempt(
        seed,
        "cqlsh",
        "--credentials",
        "/dev/null",
        "-u",
        "cassandra",
        "-p",
        "cassandra",
        seed.hostname,
        "9042",
        "-e",
        "LIST ROLES",
    )
    assert code != 0 and "AuthenticationFailed" in output, output
    assert_no_secret_shown(cluster)
    destroy_and_check(cluster)


KEYSPACE = "platter_resize"
ROWS = 300


def cql(member: Instance, statements: str) -> str:
    """cqlsh in the member's container, logged in as the owner (root's credentials file)."""
    argv = ["cqlsh", "--no-color", "--request-timeout=60", member.hostname, "9042"]
    return run(member, *argv, "-e", statements, timeout=240)


def insert(member: Instance, rows: range) -> dict[int, str]:
    written = {n: f"row {n} written through {member.hostname}" for n in rows}
    values = " ".join(
        f"INSERT INTO {KEYSPACE}.t (id, v) VALUES ({n}, '{v}');"  # noqa: S608  (CQL, our constants)
        for n, v in written.items()
    )
    cql(member, f"CONSISTENCY QUORUM; {values}")
    return written


def read_at_quorum(member: Instance) -> dict[int, str]:
    select = f"SELECT JSON id, v FROM {KEYSPACE}.t;"  # noqa: S608  (CQL, our constants)
    output = cql(member, f"CONSISTENCY QUORUM; PAGING OFF; {select}")
    rows = [json.loads(line) for line in output.splitlines() if line.strip().startswith("{")]
    return {row["id"]: row["v"] for row in rows}


def ring(member: Instance) -> list[str]:
    """The states (UN, UJ, ...) of the ring's members as `nodetool status` shows them."""
    return re.findall(r"^([UD][NLJM])\s", run(member, "nodetool", "status"), re.MULTILINE)


@pytest.mark.timeout(2400)  # a launch, a grow (bootstrap, checks, cleanup), a shrink, a refusal
def test_cassandra_grows_and_shrinks_by_one_keeping_every_row(dispatching, lab_cleanup, alice):
    cluster = launched(alice, "cassandra", "cassandra-resize", size=1, mem=1536)
    seed = instance(cluster, "seed")
    cql(
        seed,
        f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
        "{'class': 'NetworkTopologyStrategy', 'dc1': 2}; "
        f"CREATE TABLE {KEYSPACE}.t (id int PRIMARY KEY, v text);",
    )
    written = insert(seed, range(ROWS))

    grown = resized(cluster, 2, role="node", seconds=900)
    new = instance(grown, "node", 1)
    assert ring(seed) == ["UN"] * 3
    messages = list(grown.events.values_list("message", flat=True))
    assert f"{new.hostname} joined the ring (UN)" in messages, messages
    assert any(m.startswith(f"nodetool cleanup on {seed.hostname}") for m in messages), messages
    # It bootstrapped: nothing was written since, yet it holds SSTables of the table (a node
    # that had not streamed would own its ranges empty).
    stats = run(new, "nodetool", "tablestats", f"{KEYSPACE}.t")
    assert int(re.search(r"SSTable count: (\d+)", stats).group(1)) > 0, stats
    assert read_at_quorum(new) == written  # its coordinator logs the owner in (system_auth)
    written |= insert(new, range(ROWS, 2 * ROWS))

    shrunk = resized(grown, 1, role="node", seconds=900)
    assert ring(seed) == ["UN"] * 2
    messages = list(shrunk.events.values_list("message", flat=True))
    assert f"{new.hostname} left the ring (decommissioned)" in messages, messages
    assert shrunk.instances.filter(role="seed", active=True).count() == 1
    for member in (seed, instance(shrunk, "node", 0)):
        assert read_at_quorum(member) == written

    # RF 2 needs two nodes: a shrink to the seed alone is refused before anything changes.
    mark = shrunk.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_resize(cluster.id, 0) == S.RESIZING
    refused = wait_for(cluster.id, S.RUNNING, seconds=300)
    failed = refused.events.get(id__gt=mark, message__startswith="resize failed")
    assert f"keyspace {KEYSPACE} has replication factor 2" in failed.message, failed.message
    assert "would leave 1" in failed.message
    assert refused.instances.filter(role="node", active=True).count() == 1
    assert ring(seed) == ["UN"] * 2
    assert read_at_quorum(seed) == written
    destroy_and_check(cluster)
