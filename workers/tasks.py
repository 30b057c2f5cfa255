"""Celery tasks: thin wrappers that take ids (or nothing) and call services.

Cluster tasks are safe to run twice (see workers/lifecycle.py): they are acknowledged after they
ran, and a worker lost mid-task has its task delivered again (settings: acks_late,
reject_on_worker_lost)."""

from celery import shared_task
from django.conf import settings

from apps.clusters import admission, services

from . import lifecycle, reconciler
from .drivers import NodeError


@shared_task(name="platter.ping")
def ping() -> str:
    """Round trip through the broker and a worker; used by health checks and tests."""
    return "pong"


@shared_task(name="platter.expire_leases")
def expire_leases() -> list[int]:
    """Destroy (data kept) every cluster whose lease ended; run by beat."""
    return services.expire_leases()


@shared_task(name="platter.admit_queued")
def admit_queued() -> list[int]:
    """Place queued clusters that fit now; beat runs it as a safety net besides the retry that
    follows every release."""
    return admission.admit_queued()


@shared_task(name="platter.launch_cluster")
def launch_cluster(cluster_id: int) -> str:
    return lifecycle.launch(cluster_id)


@shared_task(name="platter.stop_cluster", bind=True, max_retries=3)
def stop_cluster(self, cluster_id: int) -> str:
    try:
        return lifecycle.stop(cluster_id)
    except NodeError as error:
        raise self.retry(exc=error, countdown=5) from error


@shared_task(name="platter.start_cluster", bind=True, max_retries=3)
def start_cluster(self, cluster_id: int) -> str:
    try:
        return lifecycle.start(cluster_id)
    except NodeError as error:
        raise self.retry(exc=error, countdown=5) from error


@shared_task(name="platter.destroy_cluster", bind=True)
def destroy_cluster(self, cluster_id: int) -> str:
    """Whether to wipe the data is on the cluster (Cluster.wipe_data)."""
    try:
        return lifecycle.destroy(cluster_id)
    except NodeError as error:
        if error.transient and self.request.retries < settings.DESTROY_RETRIES:
            raise self.retry(
                exc=error, countdown=settings.DESTROY_RETRY_SECONDS,
                max_retries=settings.DESTROY_RETRIES,
            ) from error  # fmt: skip
        lifecycle.give_up_destroy(cluster_id, error)
        return "failed"


@shared_task(name="platter.reconcile")
def reconcile() -> dict:
    """Compare every node's containers with the database; run by beat."""
    return reconciler.reconcile()


@shared_task(name="platter.bench_disks")
def bench_disks(node_id: int, set_kind: bool = False) -> str:
    """fio on a node's free disks, one at a time (minutes on real disks: not in a request)."""
    from apps.inventory.models import Node

    from .benchmarks import bench_node

    node = Node.objects.filter(id=node_id).first()
    if node is None:
        return "node gone"
    report = bench_node(node, set_kind)
    return f"{len(report.measured)} measured, {len(report.failed)} failed, {report.flagged} slow"


@shared_task(name="platter.resume_stalled")
def resume_stalled() -> list[int]:
    """Re-dispatch clusters whose task was lost; run by beat."""
    return lifecycle.resume_stalled()


@shared_task(name="platter.sync_ssh_keys")
def sync_ssh_keys(user_id: int) -> dict:
    """A user's SSH keys changed: rewrite authorized_keys in their live clusters."""
    from .ssh_keys import push_keys

    return push_keys(user_id)
