"""Celery tasks: thin wrappers that take ids (or nothing) and call services.

Cluster tasks go through one runner (workers/operations.py), which decides what every failure
means. They are safe to run twice: acknowledged after they ran, and a worker lost mid-task has
its task delivered again (settings: acks_late, reject_on_worker_lost)."""

from celery import Task, shared_task

from apps.clusters import admission, services
from apps.clusters import perimeter as perimeter_rules
from apps.usage import budgets

from . import autoscale as autoscaling
from . import idle, operations, perimeter, reconciler


@shared_task(name="platter.ping")
def ping() -> str:
    """Round trip through the broker and a worker; used by health checks and tests."""
    return "pong"


@shared_task(name="platter.expire_leases")
def expire_leases() -> list[int]:
    """Destroy (data kept) every cluster whose lease ended; run by beat."""
    return services.expire_leases()


@shared_task(name="platter.stop_idle")
def stop_idle() -> dict[str, list[int]]:
    """Warn, then stop (data kept), running clusters unused for their idle limit; by beat."""
    return idle.check_idle_clusters()


@shared_task(name="platter.autoscale")
def autoscale() -> dict[str, list[int]]:
    """Read the pending work of clusters with a scaling policy and decide those past their
    cooldown; run by beat."""
    return autoscaling.run_pass()


@shared_task(name="platter.warn_budgets")
def warn_budgets() -> int:
    """Warn the groups past 80 % of a monthly budget (once a month each); run by beat."""
    return budgets.warn_budgets()


@shared_task(name="platter.admit_queued")
def admit_queued() -> list[int]:
    """Place queued clusters that fit now; beat runs it as a safety net besides the pass that
    follows every release."""
    return admission.admit_queued()


def _operate(task: Task, name: str, cluster_id: int) -> str:
    try:
        return operations.run(name, cluster_id, attempt=task.request.retries)
    except operations.Retry as retry:
        raise task.retry(exc=retry.error, countdown=retry.countdown, max_retries=None) from None


@shared_task(name="platter.launch_cluster", bind=True)
def launch_cluster(self: Task, cluster_id: int) -> str:
    return _operate(self, "launch", cluster_id)


@shared_task(name="platter.stop_cluster", bind=True)
def stop_cluster(self: Task, cluster_id: int) -> str:
    return _operate(self, "stop", cluster_id)


@shared_task(name="platter.start_cluster", bind=True)
def start_cluster(self: Task, cluster_id: int) -> str:
    return _operate(self, "start", cluster_id)


@shared_task(name="platter.destroy_cluster", bind=True)
def destroy_cluster(self: Task, cluster_id: int) -> str:
    """Whether to wipe the data is on the cluster (Cluster.wipe_data)."""
    return _operate(self, "destroy", cluster_id)


@shared_task(name="platter.resize_cluster", bind=True)
def resize_cluster(self: Task, cluster_id: int) -> str:
    """The target size is on the cluster (Cluster.resize_to)."""
    return _operate(self, "resize", cluster_id)


@shared_task(name="platter.apply_perimeter")
def apply_perimeter(cluster_id: int) -> list[str]:
    """An owner changed the allow-list: the rules of the cluster's nodes again. Returns the
    nodes that did not take them (the reconciler's refresh retries those)."""
    return sorted(perimeter.apply(perimeter_rules.nodes_of(cluster_id)))


@shared_task(name="platter.reconcile")
def reconcile() -> dict:
    """Compare every node's containers with the database; run by beat."""
    return reconciler.reconcile()


@shared_task(name="platter.bench_disks")
def bench_disks(node_id: int, set_kind: bool = False) -> str:
    """fio on a node's free disks, one at a time (minutes on real disks: not in a request)."""
    from apps.inventory.benchmarks import bench_node
    from apps.inventory.models import Node

    node = Node.objects.filter(id=node_id).first()
    if node is None:
        return "node gone"
    report = bench_node(node, set_kind)
    return f"{len(report.measured)} measured, {len(report.failed)} failed, {report.flagged} slow"


@shared_task(name="platter.resume_stalled")
def resume_stalled() -> list[int]:
    """Re-dispatch clusters whose task was lost; run by beat."""
    return operations.resume_stalled()


@shared_task(name="platter.sync_ssh_keys", bind=True)
def sync_ssh_keys(self: Task, user_id: int) -> dict:
    """A user's SSH keys changed: rewrite authorized_keys in their live clusters. At most one
    run per user at a time; a run queued while another runs waits for it."""
    from .ssh_keys import RUNNING_RETRY_SECONDS, sync

    report = sync(user_id)
    if report is None:
        raise self.retry(countdown=RUNNING_RETRY_SECONDS, max_retries=None)
    return report


@shared_task(name="platter.run_job")
def run_job(job_id: int) -> str:
    """Run a job on its cluster and follow it to its end (as long as the job runs)."""
    from .jobs import run_job as run

    return run(job_id)


@shared_task(name="platter.follow_job")
def follow_job(job_id: int, lease: str) -> str:
    """Follow a running job whose follower was lost, from where it stopped, to its end."""
    from .jobs import resume_job

    return resume_job(job_id, lease)


@shared_task(name="platter.adopt_jobs")
def adopt_jobs() -> list[int]:
    """Hand running jobs whose follower stopped beating to new followers; run by beat."""
    from apps.jobs.services import adopt_lost_jobs

    return adopt_lost_jobs()


@shared_task(name="platter.admit_jobs")
def admit_jobs() -> list[int]:
    """Give free job slots to waiting jobs, fairly; run by beat besides the pass that follows
    the end of every job."""
    from apps.jobs.admission import admission_pass

    return admission_pass()
