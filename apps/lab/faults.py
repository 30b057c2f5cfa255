"""The fault suite: real faults on a running portal and lab, and what is left after each.

Each fault hits clusters that are launching or running: a node's dockerd killed mid-launch, the
Celery worker SIGKILLed mid-task, an instance's container killed, Redis restarted, PostgreSQL
restarted. Then the suite runs what beat runs (the reconciler, resume_stalled, the admission
pass) until every cluster is running, stopped or destroyed, or failed with a reason, and
nothing is leaked, or the time is up:

- no disk, address, network segment or instance held by a failed or destroyed cluster, no disk
  marked allocated or address marked held that nobody holds;
- no container on a node that no active instance owns (an orphan);
- each user's quota usage equals what their instances hold.

It kills daemons and restarts the database and the broker, so it runs on a portal of its own:
`manage.py fault_suite` with PLATTER_STATE_DIR pointing at a scratch folder (own PostgreSQL,
Redis, a lab of its own addresses), as apps/lab/tests/test_faults.py does. It starts its own
Celery worker.
"""

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connections
from django.db.models import Count, Sum

from apps import nodes
from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.quotas import user_usage
from apps.inventory.models import Address, Disk, Network, Node
from apps.lab import devservers
from apps.nodes import NodeError
from portal.celery import app
from portal.queues import worker_command

from . import daemons, host
from .nodes import LabNode, lab_nodes

S = Cluster.State
DONE = (S.RUNNING, S.STOPPED, S.DESTROYED)  # and failed, with a reason
Log = Callable[[str], None]


@dataclass
class Outcome:
    fault: str
    clusters: int = 0
    recovered: int = 0  # running, stopped or destroyed, or failed with a reason
    failed: int = 0
    leaks: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.recovered == self.clusters and not self.leaks


class Suite:
    """One portal's clusters under faults; `run()` returns one Outcome per fault."""

    def __init__(self, log: Log = print, deadline: float = 240) -> None:
        self.log, self.deadline = log, deadline
        self.worker: subprocess.Popen | None = None
        self.worker_log = settings.STATE_DIR / "fault-worker.log"
        self.user = get_user_model().objects.get_or_create(username="fault-suite")[0]
        self.demo = ProductVersion.objects.get(product__name="demo", version="1.0")
        self.ids: list[int] = []

    # ------------------------------------------------------------ the pieces

    def start_worker(self) -> None:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"]}
        command = worker_command(f"faults-{os.getpid()}", "-c", "4")
        self.worker = subprocess.Popen(
            command,
            cwd=devservers.BASE_DIR,
            env=env,
            start_new_session=True,
            stdout=self.worker_log.open("a"),
            stderr=subprocess.STDOUT,
        )

    def kill_worker(self) -> None:
        if self.worker and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait()

    def stop_worker(self) -> None:
        if self.worker and self.worker.poll() is None:
            devservers.stop_process(self.worker)

    def launch(self, count: int, prefix: str) -> list[int]:
        """Launch demo clusters as a user would; one whose request failed after its row was
        committed (the broker down) is followed too."""
        made: list[int] = []
        for n in range(count):
            name = f"{prefix}-{len(self.ids) + n}"
            try:
                services.launch(self.user, self.demo, name, {"size": 1})
            except Exception as error:  # noqa: BLE001 (a launch may fail while the fault lasts)
                self.log(f"    launch {name}: {type(error).__name__}: {error}")
            made += Cluster.objects.filter(owner=self.user, name=name).values_list("id", flat=True)
        self.ids += made
        return made

    def wait_for(
        self, ids: list[int], states: tuple[str, ...], seconds: float = 60, *, every: bool = True
    ) -> bool:
        """Until every cluster (or, with every=False, any) is in one of `states`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = set(Cluster.objects.filter(id__in=ids).values_list("state", flat=True))
            if found and (found <= set(states) if every else found & set(states)):
                return True
            time.sleep(0.05)
        return False

    def worker_ready(self, seconds: float = 60) -> None:
        app.send_task("platter.ping").get(timeout=seconds)

    def beat(self) -> None:
        """What beat runs, at once (the fault suite cannot wait for its intervals), through
        the worker as beat would have it run."""
        for task in ("platter.reconcile", "platter.resume_stalled", "platter.admit_queued"):
            try:
                app.send_task(task).get(timeout=60)
            except Exception as error:  # noqa: BLE001 (a fault may still last: next round)
                self.log(f"    {task}: {type(error).__name__}: {error}")
                close_old_connections()

    def settle(self, ids: list[int], fault: str, started: float) -> Outcome:
        """Run the periodic net until the clusters settled and nothing leaks, or time is up."""
        outcome = Outcome(fault, clusters=len(ids))
        end = time.monotonic() + self.deadline
        while True:
            self.beat()
            try:
                clusters = list(Cluster.objects.filter(id__in=ids))
                recovered = [
                    c for c in clusters if c.state in DONE or (c.state == S.FAILED and c.reason)
                ]
                leaks = find_leaks()
            except Exception as error:  # noqa: BLE001 (the database may still restart)
                self.log(f"    checking: {error}")
                close_old_connections()
                time.sleep(1)
                continue
            outcome.recovered = len(recovered)
            outcome.failed = sum(c.state == S.FAILED for c in clusters)
            outcome.leaks = leaks
            if outcome.ok or time.monotonic() > end:
                outcome.seconds = round(time.monotonic() - started, 1)
                for cluster in clusters:
                    if cluster not in recovered:
                        outcome.leaks.append(f"cluster {cluster.id} still {cluster.state}")
                return outcome
            time.sleep(2)

    def clean_up(self) -> None:
        """Destroy (wiping) every cluster of the suite that is not gone yet, between faults."""
        for cluster in Cluster.objects.filter(id__in=self.ids).exclude(state=S.DESTROYED):
            with contextlib.suppress(services.TransitionError):
                services.request_destroy(cluster.id, keep_data=False)
        deadline = time.monotonic() + self.deadline
        while time.monotonic() < deadline:
            self.beat()
            left = Cluster.objects.filter(id__in=self.ids).exclude(state=S.DESTROYED)
            if not left.exists() and not find_leaks():
                return
            for cluster in left.filter(state=S.FAILED):
                services.request_destroy(cluster.id, keep_data=False)
            time.sleep(2)

    # ------------------------------------------------------------ the faults

    def dockerd_killed_mid_launch(self) -> list[int]:
        victim = lab_node("lab-2")
        ids = self.launch(2, "dockerd")  # a two-node lab of 2 cores each runs two at once
        self.wait_for(ids, (S.PLACING,), 30, every=False)
        kill_pidfile(victim.pidfile)
        self.log(f"    killed the dockerd of {victim.name}")
        time.sleep(10)  # the launches meet the dead node; then it comes back
        daemons.start_dockerd(victim)
        daemons.wait_for_dockerd(victim)
        nodes.client(Node.objects.get(name=victim.name)).forget()
        return ids

    def worker_killed_mid_task(self) -> list[int]:
        ids = self.launch(2, "worker")
        self.wait_for(ids, (S.PLACING, S.CONFIGURING), 30, every=False)
        self.kill_worker()
        self.log("    SIGKILLed the worker")
        self.start_worker()
        self.worker_ready()
        return ids

    def container_killed(self) -> list[int]:
        """The product's process crashes: SIGKILL from the host to the container's main
        process (a `docker kill` would count as someone's stop, which Docker never restarts)."""
        ids = self.launch(1, "container")
        if not self.wait_for(ids, (S.RUNNING,), 120):
            return ids
        instance = Instance.objects.filter(cluster_id=ids[0], active=True).first()
        node = instance.node if instance is not None else None
        info = nodes.client(node).inspect(instance.container_id) if instance and node else None
        if instance is None or node is None or info is None:  # running, so never: said if so
            self.log("    the running cluster has no container to kill")
            return ids
        os.kill(info["State"]["Pid"], signal.SIGKILL)
        self.log(f"    killed the process of {instance.hostname} on {node.name}")
        time.sleep(3)
        return ids

    def redis_restarted(self) -> list[int]:
        running = self.launch(1, "redis-before")
        self.wait_for(running, (S.RUNNING,), 120)
        devservers.down(["Redis"])
        self.log("    stopped Redis")
        ids = running + self.launch(1, "redis-during")
        time.sleep(3)
        devservers.up()
        self.log("    started Redis again")
        return ids

    def postgres_restarted(self) -> list[int]:
        ids = self.launch(2, "postgres")
        self.wait_for(ids, (S.PLACING, S.CONFIGURING), 30, every=False)
        connections.close_all()
        devservers.down(["Postgres"])
        self.log("    stopped PostgreSQL")
        time.sleep(3)
        devservers.up()
        self.log("    started PostgreSQL again")
        close_old_connections()
        return ids

    FAULTS = (
        ("dockerd killed mid-launch", dockerd_killed_mid_launch),
        ("worker SIGKILLed mid-task", worker_killed_mid_task),
        ("instance process killed", container_killed),
        ("Redis restarted", redis_restarted),
        ("PostgreSQL restarted", postgres_restarted),
    )

    def run(self, only: list[str] | None = None) -> list[Outcome]:
        outcomes = []
        self.start_worker()
        try:
            self.worker_ready()
            for name, fault in self.FAULTS:
                if only and not any(word in name for word in only):
                    continue
                self.log(f"==> {name}")
                started = time.monotonic()
                try:
                    ids = fault(self)
                except Exception as error:  # noqa: BLE001 (reported as the fault's outcome)
                    outcomes.append(Outcome(name, leaks=[f"the fault itself failed: {error}"]))
                    close_old_connections()
                    self.clean_up()
                    continue
                outcome = self.settle(ids, name, started)
                self.log(f"    {outcome}")
                outcomes.append(outcome)
                self.clean_up()
        finally:
            self.stop_worker()
        return outcomes


# ---------------------------------------------------------------- checks


def find_leaks() -> list[str]:
    """What failed or destroyed clusters still hold, containers nobody owns, and quota usage
    that does not add up; empty when all is well."""
    dead = [S.FAILED, S.DESTROYED]
    found = []
    counts = {
        "disks held by failed or destroyed clusters": DiskAllocation.objects.filter(
            active=True, instance__cluster__state__in=dead
        ),
        "instances of failed or destroyed clusters still active": Instance.objects.filter(
            active=True, cluster__state__in=dead
        ),
        "network segments held by failed or destroyed clusters": Network.objects.filter(
            holder__state__in=dead
        ),
        "disks marked allocated that nobody holds": Disk.objects.filter(
            state=Disk.State.ALLOCATED
        ).exclude(id__in=DiskAllocation.objects.filter(active=True).values("disk_id")),
        "addresses marked held that nobody holds": Address.objects.filter(held=True).exclude(
            id__in=Instance.objects.filter(active=True).values("address_id")
        ),
    }
    for what, rows in counts.items():
        if count := rows.count():
            found.append(f"{count} {what}")
    found += orphans()
    found += quota_mismatches()
    return found


def orphans() -> list[str]:
    """Containers of this portal on an answering node that no active instance owns."""
    owned = {str(i) for i in Instance.objects.filter(active=True).values_list("id", flat=True)}
    found = []
    for node in Node.objects.exclude(state=Node.State.MAINTENANCE):
        try:
            listed = nodes.client(node).containers({"platter.site": settings.PLATTER_SITE})
        except NodeError:
            continue  # a dead node's containers are counted once it answers
        found += [
            f"orphan container {c['Names'][0].lstrip('/')} on {node.name}"
            for c in listed
            if "platter.helper" not in c["Labels"]
            and c["Labels"].get("platter.instance") not in owned
        ]
    return found


def quota_mismatches() -> list[str]:
    """Each owner's quota usage against what their active instances hold."""
    found = []
    owners = Cluster.objects.values_list("owner_id", flat=True).distinct()
    for owner_id in owners:
        usage = user_usage(owner_id)
        held = Instance.objects.filter(cluster__owner_id=owner_id, active=True).aggregate(
            instances=Count("id"),
            cores=Sum("cores"),
            memory=Sum("memory_mb"),
            disks=Sum("disks"),
        )
        pairs = [
            ("instances", usage["max_instances"], held["instances"]),
            ("cores", usage["max_cores"], held["cores"] or 0),
            ("memory", usage["max_memory_mb"], held["memory"] or 0),
            ("disks", usage["max_disks"], held["disks"] or 0),
        ]
        for what, used, holding in pairs:
            if used != holding:
                found.append(
                    f"user {owner_id}: quota counts {used} {what}, instances hold {holding}"
                )
    return found


# ---------------------------------------------------------------- helpers


def lab_node(name: str) -> LabNode:
    return next(node for node in lab_nodes() if node.name == name)


def kill_pidfile(pidfile: Path) -> None:
    pid = host.pid_alive(pidfile)
    if pid is None:
        raise RuntimeError(f"no running process in {pidfile}")
    os.kill(pid, signal.SIGKILL)


def table(outcomes: list[Outcome]) -> str:
    rows = [("fault", "clusters", "recovered", "failed", "seconds", "leaks")]
    for o in outcomes:
        rows.append(
            (
                o.fault,
                str(o.clusters),
                str(o.recovered),
                str(o.failed),
                f"{o.seconds:.0f}",
                "; ".join(o.leaks) or "none",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[5]
        for row in rows
    ]
    return "\n".join(lines)


def as_json(outcomes: list[Outcome]) -> str:
    return json.dumps([{**asdict(o), "ok": o.ok} for o in outcomes], indent=2)
