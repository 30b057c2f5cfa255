"""Idle stop, the periodic part: look for use of every running cluster that has an idle limit,
then warn or stop as apps/clusters/idle.py rules (beat runs check_idle_clusters every minute).

The signals probed here (the UI proxy records its requests itself, as they happen):
- a portal job queued or running on the cluster (apps.jobs);
- what the version's plugin counts as use (apps/products: its usage_probes), each a REST API
  asked inside the container on a port it listens on: Spark's running applications and busy
  notebook kernels, YARN's applications; a product without a plugin of its own has none;
- an open connection from outside the cluster to a port an instance listens on: an ssh
  session, a cqlsh or MongoDB client, a browser through the proxy. Read from the kernel's
  /proc/net/tcp{,6} in each container; connections between the cluster's own members (gossip,
  heartbeats, a driver inside the cluster) are not use.
A probe that fails (a node down, a container restarting) reports nothing: it never stops a
cluster by itself, it only leaves the clock running as it was.

The clusters are probed at once (IDLE_PROBE_THREADS), each within IDLE_PROBE_BUDGET_SECONDS: a
tenant's slow or hung container costs its own cluster's budget, never another cluster's probe
nor the pass beyond that (the pass runs on the `idle` queue, so beat's other passes never wait
behind it). A probe over its budget reports nothing, as one that failed; its thread is left
to end with its exec's timeout."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime
from functools import partial
from typing import TypeVar

from django.conf import settings
from django.utils import timezone

from apps import nodes
from apps.clusters import idle
from apps.clusters.models import Cluster, Instance
from apps.clusters.services import StateConflict, request_stop
from apps.clusters.transitions import record_event
from apps.jobs.models import Job
from apps.nodes import NodeError
from apps.products.base import UsageProbe
from apps.products.registry import plugin_for

log = logging.getLogger(__name__)
T = TypeVar("T")
PROBE_TIMEOUT = 10  # seconds per exec
ESTABLISHED, LISTEN = "01", "0A"

# Run inside the container: prints how many items of the JSON at the URL, under the dotted key,
# count (FIELD starts with VALUE, or does not when NOT is 1; all when no FIELD).
# argv: PORT PATH KEY FIELD VALUE NOT
APP_COUNT = """import json, os, socket, sys, urllib.request as u
port, path, key, field, value, negate = sys.argv[1:7]
root = os.environ.get("PLATTER_WEB_UI_ROOT", "")
host = os.environ.get("PLATTER_HOSTNAME") or socket.gethostname()
path = path.replace("{root}", root).replace("{host}", host)
token = os.environ.get("PLATTER_UI_TOKEN", "")  # the notebook's: JupyterLab needs it
auth = {"Authorization": "token " + token} if token else {}
d = json.load(u.urlopen(u.Request("http://127.0.0.1:" + port + path, headers=auth), timeout=5))
for k in filter(None, key.split(".")):
    d = (d or {}).get(k) or []
print(sum(1 for i in d if not field or str(i.get(field, "")).startswith(value) != (negate == "1")))
"""


def app_count_argv(probe: UsageProbe) -> list[str]:
    field, value, negate = probe.which or ("", "", False)
    port, path, key = str(probe.port), probe.path, probe.key
    return ["python3", "-c", APP_COUNT, port, path, key, field, value, "1" if negate else "0"]


def check_idle_clusters(now: datetime | None = None) -> dict[str, list[int]]:
    """Probe (all at once, each within its budget), then warn or stop, every running cluster
    with an idle limit."""
    done: dict[str, list[int]] = {"warned": [], "stopped": []}
    watched = [
        cluster
        for cluster in Cluster.objects.filter(state=Cluster.State.RUNNING)
        if idle.limit_of(cluster) is not None
    ]
    found = probe_all(watched)
    for cluster in watched:
        seen = found[cluster.id]
        if seen:  # the first names it: a job before an application before a connection
            idle.record_use(cluster.id, seen[0], timezone.now())
        cluster.refresh_from_db()
        verdict = idle.verdict(cluster, now or timezone.now())
        if verdict.action == "warn":
            warn(cluster, verdict)
            done["warned"].append(cluster.id)
        elif verdict.action == "stop" and stop(cluster, verdict):
            done["stopped"].append(cluster.id)
    return done


def warn(cluster: Cluster, verdict: idle.Verdict) -> None:
    assert verdict.stops_at is not None
    minutes = max(1, round((verdict.stops_at - timezone.now()).total_seconds() / 60))
    record_event(
        cluster.id,
        f"idle for {_minutes(verdict.idle_for)}: it stops (data kept) in about {minutes} min "
        "unless it is used or kept running",
        level="warning",
    )
    Cluster.objects.filter(id=cluster.id).update(idle_warned_at=timezone.now())


def stop(cluster: Cluster, verdict: idle.Verdict) -> bool:
    assert verdict.limit is not None
    reason = (
        f"idle stop: nothing used it for {_minutes(verdict.idle_for)} "
        f"(its idle limit is {_minutes(verdict.limit)}); its data is kept"
    )
    try:
        request_stop(cluster.id, reason=reason)
    except StateConflict:
        return False  # it moved on meanwhile (stopped by hand, destroyed)
    return True


def probe_all(clusters: list[Cluster]) -> dict[int, list[str]]:
    """The signals of use of each cluster, seen now, in words: the database's here, the
    nodes' in parallel, each cluster's within IDLE_PROBE_BUDGET_SECONDS."""
    found: dict[int, list[str]] = {}
    probes: dict[int, Callable[[], list[str]]] = {}
    for cluster in clusters:
        found[cluster.id] = _job_signals(cluster)
        if not found[cluster.id]:  # a job is use enough: no need to ask its containers
            probes[cluster.id] = partial(_probe_instances, *_placed(cluster), _probes(cluster))
    budget, threads = settings.IDLE_PROBE_BUDGET_SECONDS, settings.IDLE_PROBE_THREADS
    for cluster_id, seen in within_budget(probes, budget, threads).items():
        if seen is None:
            log.warning("idle probe of cluster %s failed or passed its %s s", cluster_id, budget)
        found[cluster_id] += seen or []
    return found


def within_budget(
    calls: Mapping[int, Callable[[], T]], budget: float, threads: int
) -> dict[int, T | None]:
    """Each call's result, the calls run `threads` at a time; None for one that raised or
    ran past `budget` seconds from its own start (left running, never waited for), or that
    could not start within the pass's own bound (a budget per round of `threads` calls). The
    calls must not touch the database: a thread left behind would hold a connection."""
    if not calls:
        return {}
    threads = max(1, min(threads, len(calls)))
    started: dict[int, float] = {}
    rounds = -(-len(calls) // threads)
    last = time.monotonic() + budget * rounds

    def timed(key: int) -> T:
        started[key] = time.monotonic()
        return calls[key]()

    results: dict[int, T | None] = {}
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="idle-probe")
    try:
        pending: dict[int, Future] = {key: pool.submit(timed, key) for key in calls}
        while pending:
            now = time.monotonic()
            ends = {k: min(started[k] + budget, last) if k in started else last for k in pending}
            for key in [k for k, end in ends.items() if end <= now]:
                pending.pop(key).cancel()
                results[key] = None
            if not pending:
                break
            timeout = max(0.01, min(ends[k] for k in pending) - now)
            wait(pending.values(), timeout=timeout, return_when=FIRST_COMPLETED)
            for key in [k for k, future in pending.items() if future.done()]:
                future = pending.pop(key)
                error = future.exception()
                if error is not None:
                    log.warning("idle probe of cluster %s failed: %s", key, error)
                results[key] = None if error is not None else future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return results


def signals(cluster: Cluster) -> list[str]:
    """The signals of use seen now, in words (one cluster, no budget)."""
    return _job_signals(cluster) + _probe_instances(*_placed(cluster), _probes(cluster))


def _job_signals(cluster: Cluster) -> list[str]:
    if Job.objects.filter(cluster=cluster, state__in=["queued", "running"]).exists():
        return ["a portal job running"]
    return []


def _probes(cluster: Cluster) -> tuple[UsageProbe, ...]:
    """What the cluster's version's plugin counts as use (none for the generic plugin)."""
    return plugin_for(cluster.definition).usage_probes


def _placed(cluster: Cluster) -> tuple[list[Instance], set[str]]:
    """The cluster's placed instances, with their nodes and addresses loaded (the probes run
    in threads that never touch the database), and the members' addresses."""
    instances = list(
        Instance.objects.filter(cluster=cluster, active=True)
        .exclude(node=None)
        .select_related("node", "address")
    )
    return instances, {i.address.ip for i in instances if i.address}


def _probe_instances(
    instances: list[Instance], members: set[str], probes: tuple[UsageProbe, ...] = ()
) -> list[str]:
    found = []
    for instance in instances:
        try:
            found += _instance_signals(instance, members, probes)
        except (NodeError, TimeoutError, ValueError) as error:  # a probe that fails sees nothing
            log.info("idle probe of %s skipped: %s", instance.hostname, error)
    return found


def _instance_signals(
    instance: Instance, members: set[str], probes: tuple[UsageProbe, ...] = ()
) -> list[str]:
    if instance.node is None:  # not placed (the query excludes these; for the type checker)
        return []
    client = nodes.client(instance.node)
    container = instance.container_id or instance.hostname
    code, table = client.exec(container, ["cat", "/proc/net/tcp", "/proc/net/tcp6"], PROBE_TIMEOUT)
    if code != 0:
        return []
    listening, clients = connections(table, members)
    found = []
    for probe in sorted((p for p in probes if p.port in listening), key=lambda p: p.port):
        code, out = client.exec(container, app_count_argv(probe), PROBE_TIMEOUT)
        if code == 0 and out.strip().isdigit() and int(out.strip()) > 0:
            found.append(f"{probe.words} on {instance.hostname}")
    found += [f"{client_ip} connected to {instance.hostname}:{port}" for port, client_ip in clients]
    return found[:3]


def connections(table: str, members: set[str]) -> tuple[set[int], list[tuple[int, str]]]:
    """From /proc/net/tcp{,6} text: the ports listened on, and the established connections to
    them from outside the cluster as (port, client address)."""
    rows = []
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 4 or ":" not in fields[1] or fields[0] == "sl":
            continue
        local, remote, state = fields[1], fields[2], fields[3]
        rows.append((_address(local), _address(remote), state))
    listening = {port for (_, port), _, state in rows if state == LISTEN}
    clients = []
    for (_, port), (client_ip, _), state in rows:
        if state != ESTABLISHED or port not in listening or client_ip is None:
            continue
        address = ipaddress.ip_address(client_ip)
        if address.is_loopback or client_ip in members:
            continue
        clients.append((port, client_ip))
    return listening, clients


def _address(text: str) -> tuple[str | None, int]:
    """'0100007F:1F90' (little-endian words, as the kernel prints them) -> ('127.0.0.1', 8080)."""
    host, port = text.split(":")
    try:
        raw = bytes.fromhex(host)
        words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
        address = ipaddress.ip_address(words)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        return str(address), int(port, 16)
    except ValueError:
        return None, int(port, 16) if all(c in "0123456789abcdefABCDEF" for c in port) else 0


def _minutes(delta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"
