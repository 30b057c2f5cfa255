"""The Celery queues, kept free of imports so `./platter` can read them before the venv exists.

Work is split by how long it may take, so a slow node or a long job only ever delays work of
its own kind (production runs one or more workers per queue, deploy/systemd):

- clusters: launch, stop, start, destroy. What a user waits for; seconds each, bounded by the
  node API timeout. Run enough worker slots that one silent node (a launch retrying it for
  NODE_API_TIMEOUT x NODE_API_RETRIES) does not hold up everyone.
- nodes: long jobs on one node (fio disk benchmarks: minutes per disk).
- ssh_keys: pushing a user's changed SSH keys into their live clusters (an exec of up to 30 s
  per cluster); at most one run per user waits at a time (apps.accounts.ssh_sync), and a user
  with many clusters only ever delays other key changes, never a launch.
- jobs: users' Spark and MapReduce jobs (apps.jobs): a worker slot follows each job for as
  long as it runs. A job's task is sent only once it is admitted (apps/jobs/admission.py: at
  most JOBS_PER_USER_RUNNING of a user's jobs and JOBS_RUNNING_MAX in all), so the queue never
  holds more than its workers' slots and jobs never take a slot of another kind.
- idle: the idle probes (workers/idle.py) and autoscaling's readings (workers/autoscale.py),
  execs into every running cluster with an idle limit or a scaling policy: a tenant's slow
  container may make a pass slow, so it waits here, not in `periodic`.
- periodic: beat's passes (reconcile, expire leases, admit queued clusters, resume stalled
  ones) and other short housekeeping (the health check's ping). A reconcile pass asks every
  node at once and takes one node timeout at worst; it must not wait behind launches, nor
  launches behind it. It is also the default queue, but every task names its queue below.
"""

CLUSTERS = "clusters"
NODES = "nodes"
PERIODIC = "periodic"
SSH_KEYS = "ssh_keys"
JOBS = "jobs"
IDLE = "idle"
DEFAULT = PERIODIC

# Every queue; the tests' worker consumes them all (`celery worker -Q`), `./platter run` splits
# them as production does (DEV_WORKERS).
ALL_QUEUES = [CLUSTERS, NODES, PERIODIC, JOBS, SSH_KEYS, IDLE]

# Task name -> queue (settings.CELERY_TASK_ROUTES is built from it). A new task gets a line
# here: which kind of work is it? (workers/tests/test_queues.py checks that each has one.)
TASK_QUEUES = {
    "platter.ping": PERIODIC,
    "platter.autoscale": IDLE,  # an exec per cluster with a policy, each within its budget
    "platter.launch_cluster": CLUSTERS,
    "platter.stop_cluster": CLUSTERS,
    "platter.start_cluster": CLUSTERS,
    "platter.destroy_cluster": CLUSTERS,
    "platter.resize_cluster": CLUSTERS,  # a decommission ends by RESIZE_DRAIN_SECONDS
    "platter.sync_ssh_keys": SSH_KEYS,  # an exec per live cluster of the user
    "platter.apply_perimeter": CLUSTERS,  # a firewall helper per node of the cluster
    "platter.bench_disks": NODES,
    "platter.run_job": JOBS,  # as long as the user's job runs
    "platter.follow_job": JOBS,  # a running job whose follower was lost, to its end
    "platter.adopt_jobs": PERIODIC,
    "platter.admit_jobs": PERIODIC,  # database only: queued jobs into free job slots
    "platter.reconcile": PERIODIC,
    "platter.expire_leases": PERIODIC,
    "platter.admit_queued": PERIODIC,
    "platter.resume_stalled": PERIODIC,
    "platter.warn_budgets": PERIODIC,
    "platter.stop_idle": IDLE,  # a few execs per running cluster with an idle limit
}

# The workers `./platter run` starts: production's split (deploy/systemd, compose.yaml) with few
# slots each, so a user's long jobs never hold the slots of launches, destroys or housekeeping.
# Jobs and idle probes mostly wait on node execs, and bound their waits themselves (a job's
# JOB_MAX_SECONDS, the probes' budget): threads, one process each. Cluster work and beat's
# passes keep the prefork pool, which enforces the hard time limits.
DEV_WORKERS: dict[str, tuple[list[str], list[str]]] = {
    "clusters": ([CLUSTERS, NODES, SSH_KEYS], ["-c", "3"]),
    "periodic": ([PERIODIC], ["-c", "2"]),
    "jobs": ([JOBS], ["-P", "threads", "-c", "4"]),  # JOBS_RUNNING_MAX's default
    "idle": ([IDLE], ["-P", "threads", "-c", "1"]),
}


def worker_command(name: str, *options: str, queues: list[str] | None = None) -> list[str]:
    """A Celery worker on `queues` (every queue when None, as the tests and the fault suite
    start it); `name` becomes its node name (NAME@host), `options` go last (pool, log level)."""
    import sys

    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "portal",
        "worker",
        "-Q",
        ",".join(ALL_QUEUES if queues is None else queues),
        "-n",
        f"{name}@%h",
        *options,
    ]
