"""Jobs: a Spark or MapReduce program run on a running cluster, with the files it was
submitted with, its state, and its driver log (size-capped, see services.append_log)."""

from django.conf import settings
from django.db import models


class Job(models.Model):
    class Kind(models.TextChoices):
        PYSPARK = "pyspark"
        SPARK_JAR = "spark-jar"
        MAPREDUCE = "mapreduce"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        KILLED = "killed"

    # The history stays with the cluster: a destroyed cluster keeps its row, and its jobs.
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # An uploaded file's name, or a path inside the master container (e.g. the examples jar).
    main = models.CharField(max_length=255)
    main_class = models.CharField(max_length=255, blank=True)
    args = models.JSONField(default=list, blank=True)
    py_files = models.JSONField(default=list, blank=True)  # names of uploaded files
    files = models.JSONField(default=list, blank=True)  # names of uploaded files
    properties = models.JSONField(default=dict, blank=True)  # Spark --conf key=value
    # Where the job writes its result, relative to its folder in the master container.
    output_path = models.CharField(max_length=255, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    exit_code = models.IntegerField(null=True, blank=True)
    application_id = models.CharField(max_length=64, blank=True)
    reason = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    submitted = models.DateTimeField(auto_now_add=True)
    # When a job slot was given to it and its task sent (apps/jobs/admission.py); a queued job
    # without it waits, `reason` saying why. Admitted and running jobs count against the caps.
    admitted = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    ended = models.DateTimeField(null=True, blank=True)
    # The last JOB_LOG_MAX_CHARS characters of the driver's output; log_start counts the
    # characters dropped before them, so a follower's position stays valid.
    log = models.TextField(blank=True, default="")
    log_start = models.BigIntegerField(default=0)
    # What a follower needs to go on where a lost one stopped (workers/jobs.py): the detached
    # exec running the program, how many bytes of its .log file are already in `log`, and the
    # follower's heartbeat, written on every poll. The heartbeat is also the follower's lease:
    # every write is conditional on it, so a follower taken over stops at its next write.
    exec_id = models.CharField(max_length=128, blank=True)
    log_offset = models.BigIntegerField(default=0)
    followed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-submitted", "-id"]
        indexes = [
            models.Index(fields=["cluster", "state"], name="job_cluster_state"),
            # The admission pass: who holds job slots, and who waits for one.
            models.Index(
                fields=["owner", "submitted"],
                condition=models.Q(state="queued"),
                name="job_queued_owner",
            ),
            # Beat's pass for running jobs whose follower stopped beating.
            models.Index(
                fields=["followed_at"],
                condition=models.Q(state="running"),
                name="job_running_followed",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.id} ({self.kind}, {self.state})"

    @property
    def done(self) -> bool:
        return self.state in ENDED

    @property
    def duration(self) -> float | None:
        if self.started is None:
            return None
        if self.ended is None:
            from django.utils import timezone

            return (timezone.now() - self.started).total_seconds()
        return (self.ended - self.started).total_seconds()


ENDED = (Job.State.SUCCEEDED, Job.State.FAILED, Job.State.KILLED)
LIVE = (Job.State.QUEUED, Job.State.RUNNING)


class JobFile(models.Model):
    """A file uploaded with a job (its main program, a --py-files module, a --files input),
    kept in the database: it is copied into the master container when the job runs."""

    class Role(models.TextChoices):
        MAIN = "main"
        PY_FILE = "py_file"
        FILE = "file"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="uploads")
    role = models.CharField(max_length=8, choices=Role.choices)
    name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    content = models.BinaryField()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="jobfile_unique_name_per_job")
        ]

    def __str__(self) -> str:
        return self.name
