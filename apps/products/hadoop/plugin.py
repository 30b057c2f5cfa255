"""Hadoop (HDFS + YARN): workers leave by HDFS and YARN decommission and never below HDFS's
replication, MapReduce jobs, YARN applications as a signal of use."""

import re
import shlex
from collections.abc import Callable
from typing import Any

from ..base import (
    AppPage,
    BasePlugin,
    JobLike,
    Load,
    Member,
    Operator,
    ResizeAsk,
    UsageProbe,
    figure,
)
from . import decommission

MAPREDUCE = "mapreduce"


def hdfs_replication(options: dict[str, Any]) -> int:
    """dfs.replication as the cluster's NameNode has it: the replication option ("auto": 3),
    never more than the workers it launched with (hadoop-start in the image does the same)."""
    chosen = options.get("replication", "auto")
    wanted = 3 if chosen in ("auto", None) else int(chosen)
    return max(1, min(wanted, int(options.get("size", wanted))))


class HadoopPlugin(BasePlugin):
    name = "hadoop"
    title = "Hadoop (HDFS and YARN decommission, MapReduce jobs)"
    resizable = ("worker",)
    job_kinds = (MAPREDUCE,)
    # "Submitted application application_1764000000000_0001"
    application_id = re.compile(r"\b(application_\d+_\d+)\b")
    app_pages = (AppPage("application_", 8088, "cluster/app/{id}"),)  # the ResourceManager
    usage_probes = (
        UsageProbe(
            8088,
            "/ws/v1/cluster/apps?states=RUNNING,ACCEPTED",
            "apps.app",
            None,
            "a YARN application running",
        ),
    )
    drain_words = (
        "HDFS copies the leaving workers' blocks to the others and YARN lets their tasks end "
        "(decommission); they are removed once the NameNode says Decommissioned"
    )

    # YARN's pending memory: what its applications asked for and the scheduler could not place.
    load_command = ("master", [decommission.ADMIN, "yarn-load"])

    def load_of(self, answer: Any) -> Load:
        nodes = figure(answer, "nodes", 10_000)
        total = figure(answer, "total_mb")
        return Load(
            pending=figure(answer, "pending_mb"),
            available=figure(answer, "available_mb"),
            per_worker=total / nodes if nodes else 0.0,
            unit="MB",
        )

    def resize_refusal(self, ask: ResizeAsk) -> str | None:
        refusal = super().resize_refusal(ask)
        if refusal or ask.grows:
            return refusal
        replication = hdfs_replication(ask.options)
        if ask.target < replication:
            return (
                f"HDFS keeps {replication} copies of each block (dfs.replication "
                f"{replication}): at least {replication} {ask.role}s must stay; "
                f"asked {ask.target}"
            )
        return None

    def pinned_options(self, chosen: dict[str, Any], resolved: dict[str, Any]) -> dict | None:
        """HDFS's "auto" replication is min(3, launch size): new workers must not pick a
        higher one, so it is written out."""
        if chosen.get("replication", "auto") not in ("auto", None):
            return None
        return {**chosen, "replication": hdfs_replication(resolved)}

    def admit(self, op: Operator, added: list[Member]) -> None:
        decommission.admit(op, added)

    def drain(self, op: Operator, leaving: list[Member]) -> None:
        decommission.drain(op, leaving)

    def restarted(self, op: Operator, member: Member) -> None:
        decommission.restarted(op, member)

    def job_argv(self, job: JobLike, local: Callable[[str], str]) -> list[str]:
        argv = ["hadoop", "jar", local(job.main)]
        if job.main_class:
            argv.append(job.main_class)
        # Generic options follow the program name (ToolRunner programs, the examples).
        for key, value in sorted(job.properties.items()):
            argv += ["-D", f"{key}={value}"]
        return argv + list(job.args)

    def job_environment(self, job: JobLike) -> dict[str, str]:
        # Hadoop's client prints warnings only by default: the log should show the
        # application's id and progress as spark-submit's does.
        return {"HADOOP_ROOT_LOGGER": "INFO,console"}

    def job_kill_steps(self, job: JobLike) -> list[str]:
        """YARN kills the application (it ends KILLED) before the driver's session stops."""
        if job.application_id.startswith("application_"):
            return [f"yarn application -kill {shlex.quote(job.application_id)} || true"]
        return []


PLUGIN = HadoopPlugin()
