"""`platter jobs`: submit Spark and MapReduce jobs to a cluster, follow their driver log,
read their results, kill them (the portal's /api/v1/clusters/<id>/jobs and /api/v1/jobs)."""

import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click
import httpx
from rich.table import Table

from . import render
from .api import Api, api_error
from .common import LOG_FOLLOW_SECONDS, cluster_id, connect, emit, with_json
from .errors import CliError, ExitCode

ENDED = {"succeeded", "failed", "killed"}
KINDS = ["spark", "pyspark", "spark-jar", "mapreduce"]


@click.group()
def jobs() -> None:
    """Spark and MapReduce jobs on your running clusters.

    \b
      platter jobs submit spark CLUSTER app.py --py-files lib.py -- ARGS --wait
      platter jobs submit mapreduce CLUSTER /path/in/the/container.jar --class wordcount -- in out
      platter jobs ls [CLUSTER]    platter jobs show ID    platter jobs logs ID -f
      platter jobs kill ID         platter jobs outputs ID  platter jobs get ID FILE
    """


def _kind(kind: str, main: str) -> str:
    if kind == "spark":  # the program says which
        return "pyspark" if main.endswith(".py") else "spark-jar"
    return kind


def _upload(path: str, field: str) -> tuple[str, tuple[str, bytes]]:
    found = Path(path)
    if not found.is_file():
        raise CliError(f"{field}: no such file {path}", ExitCode.USAGE)
    return field, (found.name, found.read_bytes())


@jobs.command()
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("cluster")
@click.argument("main", metavar="PROGRAM")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--class", "main_class", help="Main class (spark-jar), or a MapReduce program.")
@click.option("--py-files", multiple=True, metavar="FILE", help="A Python module (pyspark).")
@click.option("--files", multiple=True, metavar="FILE", help="A file for the job's folder.")
@click.option("--conf", multiple=True, metavar="KEY=VALUE", help="A Spark property (or -D).")
@click.option(
    "--output",
    help="The job's result folder, relative to its own folder; or hdfs:///… (MapReduce).",
)
@click.option("--wait", is_flag=True, help="Stream the log; exit 0 only if the job succeeds.")
@with_json
def submit(
    kind: str,
    cluster: str,
    main: str,
    args: tuple[str, ...],
    main_class: str | None,
    py_files: tuple[str, ...],
    files: tuple[str, ...],
    conf: tuple[str, ...],
    output: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Run PROGRAM (a local .py or .jar, uploaded; or an absolute path in the cluster's master
    container) on CLUSTER with ARGS (after --; a last --wait there is still this command's)."""
    if args and args[-1] == "--wait":  # `platter jobs submit spark C app.py -- a b --wait`
        args, wait = args[:-1], True
    client = connect({"main": "PROGRAM", "main_class": "--class", "output": "--output"})
    ident = cluster_id(client, cluster)
    data: dict[str, Any] = {"kind": _kind(kind, main), "args": list(args), "properties": conf}
    if main_class:
        data["main_class"] = main_class
    if output:
        data["output"] = output
    uploads = [_upload(p, "py_files") for p in py_files] + [_upload(p, "files") for p in files]
    if Path(main).is_file():
        uploads.insert(0, _upload(main, "main"))
    elif main.startswith(("/", "hdfs:")):
        data["main"] = main  # in the container, or in the cluster's HDFS
    else:
        raise CliError(f"PROGRAM: no such file {main}", ExitCode.USAGE)
    job = client.request("POST", f"clusters/{ident}/jobs", data=data, files=uploads)
    if not wait:
        if as_json:
            return emit(job)
        click.echo(f"Submitted job {job['id']} ({job['kind']}, {job['state']}).")
        click.echo(f"Follow it with `platter jobs logs {job['id']} -f`.")
        return None
    if not as_json:
        click.echo(f"Submitted job {job['id']}; its log follows.", err=True)
    follow_log(client, job["id"], 0, out=sys.stderr if as_json else sys.stdout)
    return finish(client.get(f"jobs/{job['id']}"), as_json)


def finish(job: dict, as_json: bool) -> None:
    """The job's end: 0 when it succeeded; 1 (with the reason) otherwise."""
    if as_json:
        emit(job)
    else:
        click.echo(f"Job {job['id']} {job['state']}" + _why(job), err=True)
    if job["state"] != "succeeded":
        raise click.exceptions.Exit(int(ExitCode.REFUSED))


def _why(job: dict) -> str:
    code = f", exit code {job['exit_code']}" if job.get("exit_code") is not None else ""
    return f"{code}" + (f": {job['reason']}" if job.get("reason") else ".")


def follow_log(client: Api, job_id: int, since: int, out: Any) -> int:
    """Write the log from `since` as it comes until the job ends; the position reached. The
    portal ends a follow after LOG_FOLLOW_SECONDS: it is asked again from where it left."""
    while True:
        params: dict[str, str | int] = {
            "since": since,
            "follow": "true",
            "seconds": LOG_FOLLOW_SECONDS,
        }
        timeout = httpx.Timeout(30.0, connect=10.0, read=LOG_FOLLOW_SECONDS + 30.0)
        request = client.http.build_request(
            "GET", f"jobs/{job_id}/log", params=params, timeout=timeout
        )
        try:
            response = client.http.send(request, stream=True)
            try:
                if response.status_code >= 400:
                    response.read()
                    raise api_error(response, client.url, client.flags)
                for text in response.iter_text():
                    out.write(text)
                    out.flush()
                    since += len(text)
            finally:
                response.close()
        except httpx.HTTPError as error:
            message = f"cannot reach the portal at {client.url}: {error}"
            raise CliError(message, ExitCode.AUTH) from None
        if client.get(f"jobs/{job_id}")["state"] in ENDED:
            # Whatever the worker stored after the stream's last read.
            rest = client.http.get(f"jobs/{job_id}/log", params={"since": since})
            out.write(rest.text)
            return since + len(rest.text)
        time.sleep(0.5)


def jobs_table(rows: list[dict]) -> Table:
    table = Table("id", "cluster", "kind", "main", "state", "submitted", "took", "reason", box=None)
    for j in rows:
        took = f"{j['duration']:.0f} s" if j.get("duration") is not None else "-"
        table.add_row(
            str(j["id"]),
            j["cluster_name"],
            j["kind"],
            j["main"],
            render.state(j["state"]),
            render.when(j["submitted"]),
            took,
            j.get("reason") or "",
        )
    return table


@jobs.command(name="ls")
@click.argument("cluster", required=False)
@with_json
def list_jobs(cluster: str | None, as_json: bool) -> None:
    """Your jobs, newest first (on CLUSTER only when named)."""
    client = connect()
    path = f"clusters/{cluster_id(client, cluster)}/jobs" if cluster else "jobs"
    rows = list(client.pages(path))
    return emit(rows) if as_json else render.out.print(jobs_table(rows))


@jobs.command()
@click.argument("job_id", type=int, metavar="ID")
@with_json
def show(job_id: int, as_json: bool) -> None:
    """A job: what it runs, its state, exit code, application id and times."""
    job = connect().get(f"jobs/{job_id}")
    if as_json:
        return emit(job)
    render.out.print(jobs_table([job]))
    for name in ("main_class", "args", "py_files", "files", "properties", "output_path"):
        if job.get(name):
            click.echo(f"{name}: {job[name]}")
    if job.get("application_id"):
        click.echo(f"application: {job['application_id']}")
    return None


@jobs.command()
@click.argument("job_id", type=int, metavar="ID")
@click.option("-f", "--follow", is_flag=True, help="Go on with new lines until the job ends.")
def logs(job_id: int, follow: bool) -> None:
    """The job's driver log (its last JOB_LOG_MAX_CHARS characters are kept)."""
    client = connect()
    if follow:
        follow_log(client, job_id, 0, sys.stdout)
        return
    client.get(f"jobs/{job_id}")  # a 404 in words
    sys.stdout.write(client.http.get(f"jobs/{job_id}/log").text)


@jobs.command()
@click.argument("job_id", type=int, metavar="ID")
@with_json
def kill(job_id: int, as_json: bool) -> None:
    """Cancel the job: YARN kills its application, the Spark driver stops; it ends killed."""
    job = connect().post(f"jobs/{job_id}/cancel")
    if as_json:
        return emit(job)
    click.echo(f"Job {job_id}: {'killed' if job['state'] == 'killed' else 'being killed'}.")
    return None


@jobs.command()
@click.argument("job_id", type=int, metavar="ID")
@with_json
def outputs(job_id: int, as_json: bool) -> None:
    """The files the job left in its output path."""
    body = connect().get(f"jobs/{job_id}/outputs")
    if as_json:
        return emit(body)
    for f in body["files"]:
        click.echo(f"{f['size']:>12}  {f['name']}")
    return None


@jobs.command(name="get")
@click.argument("job_id", type=int, metavar="ID")
@click.argument("name", metavar="FILE")
@click.option("-o", "--out", "target", type=click.Path(dir_okay=False), help="Default: stdout.")
def get_output(job_id: int, name: str, target: str | None) -> None:
    """Download FILE from the job's output path: a regular file, its first
    PLATTER_JOB_RESULT_MAX_BYTES bytes (the portal's cap; a note says when it cut the file).
    A folder, a symbolic link or an HDFS pattern is refused, saying which."""
    client = connect()
    path = f"jobs/{job_id}/outputs/{quote(name)}"  # a name may hold "?", "#" or "%"
    try:
        with client.http.stream("GET", path) as response:
            if response.status_code >= 400:
                response.read()
                raise api_error(response, client.url, client.flags)
            with open(target, "wb") if target else nullcontext(sys.stdout.buffer) as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
            size = response.headers.get("X-Output-Size", "")
            sent = response.headers.get("Content-Length", "")
    except httpx.HTTPError as error:
        message = f"cannot reach the portal at {client.url}: {error}"
        raise CliError(message, ExitCode.AUTH) from None
    if size.isdigit() and sent.isdigit() and int(sent) < int(size):
        click.echo(
            f"Note: {name} is {size} bytes; the portal sends its first {sent} "
            "(its download cap, PLATTER_JOB_RESULT_MAX_BYTES).",
            err=True,
        )
