"""Spark (standalone): workers leave once no executor runs on them, a notebook instance is
added as a grow of its role, PySpark and jar jobs, running applications and busy notebook
kernels as signals of use, JupyterLab's readiness."""

import re
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from ..base import (
    AppPage,
    BasePlugin,
    JobLike,
    Load,
    Member,
    NotebookProbe,
    Operator,
    ResizeFailed,
    UsageProbe,
    admin,
    figure,
)

PYSPARK, SPARK_JAR = "pyspark", "spark-jar"
NOTEBOOK_ROLE, NOTEBOOK_PORT = "notebook", 8888
ADMIN = "spark-admin"  # deploy/images/spark/rootfs/opt/platter/bin/spark-admin
# JupyterLab's /api/status, asked inside its container with the cluster's UI token (it
# answers nothing without it): the answer holds the marker only when it answers.
NOTEBOOK_READY = '"ready": true'


def drain(op: Operator, leaving: list[Member]) -> None:
    """Spark workers leave once no executor runs on them (cores used 0 on the master's
    status), or the resize fails past the drain's time (op.drain_seconds)."""
    master = next((m for m in op.members() if m.role == "master"), None)
    if master is None:
        raise ResizeFailed("the cluster has no running master")
    names = {m.hostname for m in leaving} | {m.ip for m in leaving if m.ip}
    deadline = time.monotonic() + op.drain_seconds
    while True:
        workers = admin(op, master, [ADMIN, "workers", "--master", master.hostname], 60)
        busy = [
            w["host"]
            for w in workers
            if w["host"] in names and w["state"] == "ALIVE" and w["cores_used"]
        ]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise ResizeFailed(
                f"executors still run on {', '.join(busy)} after "
                f"{op.drain_seconds} s; the workers stay"
            )
        op.event(f"waiting for executors to end on {len(busy)} workers")
        time.sleep(settings.RESIZE_POLL_SECONDS)


class SparkPlugin(BasePlugin):
    name = "spark"
    title = "Spark standalone (executors drained, PySpark and jar jobs, notebook)"
    resizable = ("worker", NOTEBOOK_ROLE)
    job_kinds = (PYSPARK, SPARK_JAR)
    # "Connected to Spark cluster with app ID app-20261125213000-0001" (the standalone master)
    application_id = re.compile(r"\b(app-\d{14}-\d{4,})\b")
    app_pages = (AppPage("app-", 8080, "app/?appId={id}"),)  # the Spark master's UI
    # A notebook's own Spark application lives as long as its kernel, busy or not: it is left
    # out, and the notebook counts by its busy kernels instead.
    usage_probes = (
        UsageProbe(
            8080,
            "/json/",
            "activeapps",
            ("name", "notebook on ", True),
            "a Spark application running",
        ),
        UsageProbe(
            NOTEBOOK_PORT,
            "{root}/{host}/8888/api/kernels",
            "",
            ("execution_state", "busy", False),
            "a busy notebook kernel",
        ),
    )
    notebook_probe = NotebookProbe(NOTEBOOK_ROLE, [ADMIN, "notebook-status"], NOTEBOOK_READY)
    drain_words = "leaving workers are removed once no executor runs on them"

    # The cores running applications' stages wait for, within each one's spark.cores.max.
    load_command = ("master", [ADMIN, "load"])

    def drain(self, op: Operator, leaving: list[Member]) -> None:
        drain(op, leaving)

    def load_of(self, answer: Any) -> Load:
        return Load(
            pending=figure(answer, "pending_cores", 100_000),
            available=figure(answer, "free_cores", 100_000),
            per_worker=figure(answer, "cores_per_worker", 1_000),
            unit="cores",
        )

    def job_argv(self, job: JobLike, local: Callable[[str], str]) -> list[str]:
        """spark-submit (client mode: the driver runs here, inside the cluster's network,
        against the master spark-defaults.conf names)."""
        argv = ["spark-submit", "--deploy-mode", "client", "--name", f"platter-job-{job.id}"]
        if job.kind == SPARK_JAR:
            argv += ["--class", job.main_class]
        if job.py_files:
            argv += ["--py-files", ",".join(local(n) for n in job.py_files)]
        if job.files:
            argv += ["--files", ",".join(local(n) for n in job.files)]
        for key, value in sorted(job.properties.items()):
            argv += ["--conf", f"{key}={value}"]
        return [*argv, local(job.main), *job.args]

    def job_environment(self, job: JobLike) -> dict[str, str]:
        # A PySpark driver's prints reach the log as they happen, not in one block at its
        # exit (which the JVM may not copy out before it exits itself).
        return {"PYTHONUNBUFFERED": "1"}


PLUGIN = SparkPlugin()
