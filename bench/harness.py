"""A bench's own portal beside the dev one (time_to_ready, jobs, terasort): a database, Redis
database, site label and lab address slot of its own, its own Celery worker, and waiting for
the clusters it launches there."""

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from bench.bench_db import database_url, recreate_database
from portal.queues import worker_command

ROOT = Path(__file__).resolve().parent.parent


def isolate(site: str, redis_db: str, address_slot: str) -> None:
    """This process and the worker it starts on the bench's Redis database, site label and
    slice of the lab's segments (the dev portal, slot 0, may run beside it)."""
    redis = settings.REDIS_URL.rsplit("/", 1)[0] + "/" + redis_db
    os.environ.update(
        REDIS_URL=redis,
        PLATTER_SITE=site,
        PLATTER_DISPATCH_CLUSTER_TASKS="1",
        PLATTER_LAB_ADDRESS_SLOT=address_slot,
    )
    settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = redis
    settings.PLATTER_SITE = site
    settings.LAB_ADDRESS_SLOT = int(address_slot)


@contextmanager
def own_database(name: str) -> Iterator[None]:
    """`name` made empty on the portal's PostgreSQL server and the default database while
    the block runs; dropped afterwards (also on Ctrl-C), the portal's database again."""
    db = settings.DATABASES["default"]
    admin_db = db["NAME"]
    if admin_db == name:
        raise SystemExit(f"point DATABASE_URL at a normal database; the bench makes {name}")
    recreate_database(admin_db, name)
    db["NAME"] = name
    try:
        yield
    finally:
        from django.db import connections

        connections.close_all()
        db["NAME"] = admin_db
        recreate_database(admin_db, name, drop_only=True)


@contextmanager
def celery_worker(database: str, log_path: Path) -> Iterator[subprocess.Popen]:
    """The bench's Celery worker on `database`, logging to `log_path`, stopped at the end."""
    env = {**os.environ, "DATABASE_URL": database_url(database)}
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            worker_command(
                f"bench-{os.getpid()}",
                *("-c", "4", "-l", "info", "--without-gossip", "--without-mingle"),
            ),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield worker
        finally:
            worker.terminate()
            worker.wait(timeout=60)


def prepare(worker_log: str) -> None:
    """The running lab checked first, then the bench database migrated, the lab and the
    catalog in it, no tasks left over from an earlier run, and the bench's worker answering
    (its log named if it does not)."""
    from django.core.management import call_command

    from apps.lab import lab
    from bench.raw_path import remove_leftovers
    from portal.celery import app

    if not lab.is_up():
        raise SystemExit("the lab is not running: start it with ./platter lab up")
    call_command("migrate", verbosity=0)
    if remove_leftovers(lab.sync_inventory()):
        print("# removed raw containers an earlier run left behind", flush=True)
    call_command("load_catalog", verbosity=0)
    app.control.purge()
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if time.monotonic() > deadline:
            raise SystemExit(f"the bench worker did not start; see {worker_log}")


def wait_for(cluster_id: int, state: str, seconds: float = 120) -> float:
    """perf_counter() when the cluster reached `state`; SystemExit when it failed or took
    longer than `seconds`."""
    from apps.clusters.models import Cluster

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        current = Cluster.objects.filter(id=cluster_id).values_list("state", "reason").get()
        if current[0] == state:
            return time.perf_counter()
        if current[0] == "failed":
            raise SystemExit(f"cluster {cluster_id} failed: {current[1]}")
        time.sleep(0.01)
    raise SystemExit(f"cluster {cluster_id} did not reach {state} in {seconds} s")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def lab_version(product: str):
    """The newest enabled version of `product` whose image every lab node holds, or
    SystemExit naming what to do."""
    from apps.catalog.images import missing_images
    from apps.catalog.models import ProductVersion

    version = (
        ProductVersion.objects.filter(product__name=product, enabled=True).order_by("-id").first()
    )
    if version is None or missing_images(version):
        title = product.capitalize()
        raise SystemExit(f"no {title} version whose image the lab nodes hold: ./platter lab up")
    return version


def bench_user(name: str = "bench"):
    """The bench's user, with the demo's quota."""
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Quota
    from apps.lab.management.commands.seed_demo import DEMO_QUOTA

    user = get_user_model().objects.create_user(name)
    Quota.objects.create(user=user, **DEMO_QUOTA)
    return user
