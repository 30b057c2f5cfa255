"""What single-disk claims would gain if the whole reservation ran as one server-side call.

    .venv/bin/python bench/reservation_ceiling [--nodes 10000] [--clients 1,8] [--claims 400]

A measurement for a design decision, not a product path. bench/reservation's claims reach about
a tenth of the raw transaction rate with 8 clients on 2 cores; the question is whether moving
the reservation into the database (its placement and quota rules rewritten in PL/pgSQL) would
reach the aim of a quarter. In one database and one run, for each client count:

- raw: BEGIN; SELECT .. FOR UPDATE; UPDATE; COMMIT, as in bench/reservation;
- python: apps.clusters.reservation.reserve(), the product's path (two pipelined round trips,
  the rules in Python between them, a metric written to Redis);
- one call: the same statements, taken from apps.clusters.reservation when this runs, inside
  one PL/pgSQL function called once per claim. The node is the first candidate and the quota
  usage is read but not compared: what it leaves out only makes it cheaper, so it bounds what
  the move could buy.

CPU per claim is the client processes' CPU and their Postgres backends' CPU (read from /proc
when Postgres runs on this machine), over the claims: on a machine where every core is busy,
throughput is the cores over their sum.
"""

import argparse

from django.conf import settings

from bench import reservation as bench  # its database, inventory and runners

FUNCTION = "bench_reserve_in_one_call"


def one_call_function() -> str:
    """CREATE FUNCTION running the reservation's statements for a single-instance cluster,
    with the product's SQL texts and their parameters turned into PL/pgSQL variables."""
    from apps.clusters import placement, quotas, reservation

    candidates, _, _ = placement.cluster_candidates_statement(0)
    lock, usage = (sql for sql, _ in quotas.cluster_owner_statements(0))
    free, _, _ = placement.free_statement([0], {"hdd"})
    write, _ = reservation._write_statement(0, reuse=False)
    values = {
        "%(cluster)s": "p_cluster",
        "%(exclude)s": "p_cluster",
        "%(window)s": "p_window",
        "%(name)s": "p_network",
        "%(want)s": "v_want",
        "%(now)s": "now()",
        "%(reserved)s": "'reserved'",
        "%(to)s": "'placing'",
        "%(reason)s": "''",
        "%(sources)s": "ARRAY['queued']",
        "%(level)s": "'info'",
        "%(message)s": "'placing'",
    }

    def plpgsql(sql: str, positional: str = "") -> str:
        for name, value in values.items():
            sql = sql.replace(name, value)
        if "%" in sql.replace("%s", "", 1 if positional else 0):
            raise SystemExit(f"a parameter this bench does not know: {sql}")
        return sql.replace("%s", positional).strip()

    # The address take leads with its own CTE (the segment), and a data-modifying CTE must
    # stay at the top level: its UPDATE becomes one more CTE beside it.
    update = "\nUPDATE inventory_address SET held = true"
    take = plpgsql(reservation.TAKE_ADDRESSES_SQL)
    if not take.startswith("WITH segment AS (") or update not in take:
        raise SystemExit(f"the address take changed shape; adapt this bench: {take}")
    taken = take.replace(update, ", taken AS (" + update.strip(), 1) + ")"
    written = plpgsql(write).replace(
        "SELECT instance_id, array_agg(disk_id ORDER BY disk_id) FROM held GROUP BY instance_id",
        "SELECT COUNT(*) INTO v_disks FROM held",
    )
    return f"""
CREATE OR REPLACE FUNCTION {FUNCTION}(p_cluster bigint, p_network text, p_window int)
RETURNS int LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $body$
DECLARE
    v_instance bigint; v_addresses bigint[]; v_node bigint; v_want json; v_disks int;
BEGIN
    SELECT MIN(c.instance) INTO v_instance
    FROM ({plpgsql(reservation.CLUSTER_SQL, "p_cluster")}) c(o, s, n, r, instance);
    PERFORM * FROM ({plpgsql(lock)}) locked;
    PERFORM * FROM ({plpgsql(usage)}) used;
    {taken} SELECT array_agg(id) INTO v_addresses FROM taken;
    SELECT found.node_id INTO v_node FROM ({plpgsql(candidates)}) found LIMIT 1;
    PERFORM * FROM ({plpgsql(reservation.LOCK_NODES_SQL, "ARRAY[v_node]")}) nodes;
    PERFORM * FROM ({plpgsql(free, "ARRAY[v_node]")}) free;
    v_want := json_build_array(json_build_object(
        'n', 0, 'instance_id', v_instance, 'node_id', v_node, 'address_id', v_addresses[1],
        'hostname', 'claim-' || p_cluster, 'kind', 'hdd', 'count', 1));
    {written};
    RETURN v_disks;
END
$body$"""  # noqa: S608  (the product's SQL constants)


def _claim_client(how: str, dbname: str, warmup_id: int, ids: list[int], barrier, out) -> None:
    """Claim `ids` one after another the `how` way (python or one call; see timed_claims)."""
    bench._client_setup(dbname)
    from django.db import connection, transaction

    from apps.clusters.reservation import Reservation, reserve

    def one_call(cluster_id: int) -> bool:
        with transaction.atomic():
            row = connection.connection.execute(
                f"SELECT {FUNCTION}(%s, %s, %s)",
                [cluster_id, settings.SCHEDULER_NETWORK, settings.SCHEDULER_CANDIDATE_WINDOW],
                prepare=True,
            ).fetchone()
        return row[0] == 1

    def python(cluster_id: int) -> bool:
        return isinstance(reserve(cluster_id), Reservation)

    claim = one_call if how == "one call" else python
    out.put(bench.timed_claims(claim, warmup_id, ids, barrier))
    connection.close()


def run(how: str, users, version, clients: int, claims: int) -> dict:
    """Queue `claims` single-disk clusters on a fresh allocation state (the history stays) and
    claim them the `how` way with `clients` processes."""
    bench.reset_allocations()
    queued = bench.queue_clusters(users, version, (1, 1, 1024, 1), claims + clients)
    warmups, ids = bench.split(queued, clients)
    share = lambda slot: (how, bench.BENCH_DB, warmups[slot], ids[slot::clients])  # noqa: E731
    latencies, ok, wall, used = bench.run_processes(clients, _claim_client, share)
    servers = [u["server_cpu"] for u in used]
    return {
        "ok": ok,
        "rate": len(ids) / wall,
        "p50": bench.pct(latencies, 50),
        "p99": bench.pct(latencies, 99),
        "client": sum(u["client_cpu"] for u in used) / len(ids) * 1000,
        "server": None if None in servers else sum(servers) / len(ids) * 1000,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--clients", default="1,8")
    parser.add_argument("--claims", type=int, default=400)
    args = parser.parse_args(argv)
    with bench.bench_database():
        ceiling(args)


def ceiling(args) -> None:
    from django.db import connection

    users, version = bench.prepare()
    bench.build_inventory(args.nodes)
    bench.add_history(users, version, args.nodes)
    with connection.cursor() as cursor:
        cursor.execute(one_call_function())
    print(bench.describe_setup())
    print(f"# {args.nodes} nodes; single-instance single-disk claims; load {bench._load()}")
    header = (
        f"{'cli':>3} {'path':<8} {'ok':>4} {'p50 ms':>7} {'p99 ms':>7} {'claims/s':>8}"
        f" {'raw tx/s':>8} {'ratio':>6} {'client cpu ms':>13} {'server cpu ms':>13}"
    )
    print(header)
    print("-" * len(header))
    for clients in (int(c) for c in args.clients.split(",")):
        raw_before, _ = bench.raw_transactions(clients, seconds=1.0)
        found = {
            how: run(how, users, version, clients, args.claims) for how in ("python", "one call")
        }
        raw_after, _ = bench.raw_transactions(clients, seconds=1.0)
        raw = (raw_before + raw_after) / 2
        for how, result in found.items():
            server = "-" if result["server"] is None else f"{result['server']:.3f}"
            print(
                f"{clients:>3} {how:<8} {result['ok']:>4} {result['p50']:>7.2f}"
                f" {result['p99']:>7.2f} {result['rate']:>8.0f} {raw:>8.0f}"
                f" {result['rate'] / raw:>6.1%} {result['client']:>13.3f} {server:>13}",
                flush=True,
            )
    print(
        "raw = the read-modify-write transaction of bench/reservation (same clients, 1 s before"
        " and after); ratio = claims/s over raw tx/s;\nclient/server cpu = CPU of the client"
        " processes / of their Postgres backends per claim (server: '-' when Postgres is not on"
        " this machine)."
    )


if __name__ == "__main__":
    main()
