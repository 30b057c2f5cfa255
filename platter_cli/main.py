"""The `platter` command: log in to a portal, launch clusters and follow them, reach them and
destroy them, all through the portal's REST API. See `platter --help`."""

import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from . import config, jobs, render
from .api import Api
from .common import LOG_FOLLOW_SECONDS, cluster_id, connect, emit, emit_line, with_json
from .errors import EXIT_CODES_HELP, CliError, ExitCode
from .lifecycle import life_cycle

POLL_SECONDS = 1.0
FOLLOW_POLL_SECONDS = 2.0
# Launch option flags: the role property the version's option sets, and its CESGA name.
SIZING = {
    "--size": ("count", "size"),
    "--disks": ("disks", "disks"),
    "--cores": ("cores", "cpu"),
    "--memory": ("memory_mb", "mem"),
}
LAUNCH_FLAGS = {
    "name": "--name",
    "disk_kind": "--disk-kind",
    "lease": "--lease",
    "reuse_data_from": "--reuse-data-from",
    "idle_minutes": "--idle",
    "allowed_sources": "--allow",
}


def parse_memory(_ctx: Any, _param: Any, value: str | None) -> int | None:
    """MB: 512, 512M, 2G."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*([mMgG]?)[bB]?\s*", value)
    if not match:
        raise click.BadParameter(f"{value!r} is not a size in MB such as 512, 512M or 2G")
    return int(match[1]) * (1024 if match[2].lower() == "g" else 1)


def parse_hours(_ctx: Any, _param: Any, value: str | None) -> float | None:
    """Hours: 4, 1.5, 4h, 30m, 2d."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdMHD]?)\s*", value)
    if not match or float(match[1]) <= 0:
        raise click.BadParameter(f"{value!r} is not a duration such as 4 (hours), 30m, 4h or 2d")
    return float(match[1]) * {"m": 1 / 60, "h": 1, "d": 24, "": 1}[match[2].lower()]


def parse_option(_ctx: Any, _param: Any, values: tuple[str, ...]) -> dict[str, str]:
    options = {}
    for item in values:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE")
        options[name.strip()] = value
    return options


@click.group(epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
def app() -> None:
    """Platter's command line: self-service Big Data clusters on dedicated local disks.

    Log in once with `platter login` (the portal's URL and a personal API token from its
    Tokens page); PLATTER_URL and PLATTER_TOKEN override what it stored. A CLUSTER is its id,
    or the name of one of your live clusters.

    \b
    platter launch demo 1.0 --size 2 --wait
    platter events demo-1 -f
    platter destroy demo-1 --yes
    """


app.add_command(jobs.jobs)


# --- the portal and the catalog -----------------------------------------------------------


@app.command()
@click.option("--url", help="The portal, e.g. https://platter.example.org (default: ask).")
@click.option("--token", help="A personal API token; '-' reads it from stdin (default: ask).")
@with_json
def login(url: str | None, token: str | None, as_json: bool) -> None:
    """Check a portal URL and API token, and store them for the other commands.

    They go to $XDG_CONFIG_HOME/platter/config.toml (~/.config/…), readable by you only
    (mode 0600)."""
    saved = config.load()
    url = (
        url
        or os.environ.get("PLATTER_URL")
        or click.prompt("Portal URL", default=saved.url or config.DEFAULT_URL)
    )
    url = config.normal_url(url)
    if token == "-":  # noqa: S105 (stdin, not a password)
        token = sys.stdin.readline()
    token = (
        token
        or os.environ.get("PLATTER_TOKEN")
        or click.prompt("API token (the portal's Tokens page makes one)", hide_input=True)
    )
    token = token.strip()
    if not token:
        raise CliError("no token given", ExitCode.USAGE)
    quota = Api(config.Settings(url=url, token=token)).get("quota")
    user = str(quota["user"]["scope"]).removeprefix("user ")
    path = config.save(config.Settings(url=url, token=token, user=user))
    if as_json:
        emit({"url": url, "user": user, "config": str(path)})
    else:
        click.echo(f"Logged in to {url} as {user} (saved in {path}).")


@app.command()
@with_json
def logout(as_json: bool) -> None:
    """Forget the stored token (the portal's Tokens page revokes it for good)."""
    saved = config.load()
    path = config.save(config.Settings(url=saved.url))
    if as_json:
        emit({"url": saved.url, "config": str(path)})
    else:
        click.echo(f"Forgot the token for {saved.url or 'no portal'} ({path}).")


@app.command()
@click.argument("product", required=False)
@click.argument("version", required=False)
@with_json
def products(product: str | None, version: str | None, as_json: bool) -> None:
    """What you can launch; with PRODUCT VERSION its roles and options."""
    client = connect()
    if product and version:
        body = version_of(client, product, version)
        return emit(body) if as_json else render.out.print(render.version(body))
    if product:
        try:
            body = client.get(f"products/{product}")
        except CliError as error:
            if error.exit_code == ExitCode.NOT_FOUND:
                error.message = f"no product {product!r}: `platter products` lists them"
            raise
        rows = [body]
    else:
        rows = list(client.pages("products"))
    if as_json:
        return emit(body if product else rows)
    render.out.print(render.products(rows))
    return None


def version_of(client: Api, product: str, version: str) -> dict:
    try:
        return client.get(f"products/{product}/{version}")
    except CliError as error:
        if error.exit_code == ExitCode.NOT_FOUND:
            error.message = (
                f"no launchable version {version!r} of product {product!r}: "
                "`platter products` lists them"
            )
        raise


@app.command()
@with_json
def quota(as_json: bool) -> None:
    """Your limits and what your live clusters use (and your groups')."""
    body = connect().get("quota")
    return emit(body) if as_json else render.out.print(render.quota(body))


@app.command()
@click.option("--from", "start", metavar="YYYY-MM-DD", help="First UTC day (default: the 1st).")
@click.option("--to", "end", metavar="YYYY-MM-DD", help="Last UTC day, included (default today).")
@click.option(
    "--by",
    "group_by",
    type=click.Choice(["day", "cluster", "product", "user", "group"]),
    default="cluster",
    show_default=True,
    help="What to add up by.",
)
@click.option("--user", help="Staff: one user's usage.")
@click.option("--group", help="Staff: one quota group's usage.")
@with_json
def usage(
    start: str | None,
    end: str | None,
    group_by: str,
    user: str | None,
    group: str | None,
    as_json: bool,
) -> None:
    """Core-, memory- and disk-hours your clusters held (stopped ones keep their disks)."""
    asked = {"from": start, "to": end, "group_by": group_by, "user": user, "group": group}
    body = connect().get("usage", **{k: v for k, v in asked.items() if v})
    return emit(body) if as_json else render.out.print(render.usage(body))


# --- launching and following ----------------------------------------------------------------


@app.command()
@click.argument("product")
@click.argument("version")
@click.option("--size", type=int, help="Instances of the scalable role (workers, nodes).")
@click.option("--disks", type=int, help="Whole dedicated disks per instance.")
@click.option("--cores", type=int, help="Cores per instance.")
@click.option("--memory", callback=parse_memory, help="Memory per instance: MB, or 2G.")
@click.option("--disk-kind", type=click.Choice(["hdd", "ssd", "nvme"]), help="Kind of disks.")
@click.option("--lease", callback=parse_hours, help="Lease: hours, or 30m, 4h, 2d.")
@click.option("--name", help="The cluster's name (default: product-N).")
@click.option(
    "--idle",
    "idle_minutes",
    type=click.IntRange(1),
    metavar="MINUTES",
    help="Stop it (data kept) after this long unused (default: your group's, if any).",
)
@click.option(
    "--allow",
    "allowed_sources",
    multiple=True,
    metavar="CIDR",
    help="A source that may reach its ports directly: an IPv4 address or CIDR (repeatable; "
    "default: only its members and the portal, SSH for everyone with your keys).",
)
@click.option(
    "-o",
    "--option",
    "options",
    multiple=True,
    callback=parse_option,
    metavar="NAME=VALUE",
    help="Any other option of the version (repeatable).",
)
@click.option(
    "--reuse-data-from",
    type=int,
    metavar="ID",
    help="A destroyed cluster of yours whose kept disks to start from.",
)
@click.option("--wait", is_flag=True, help="Follow its events until it runs (or fails).")
@click.option(
    "--timeout",
    type=click.IntRange(1),
    default=1800,
    show_default=True,
    help="With --wait: give up after this many seconds (exit 6).",
)
@with_json
def launch(
    product: str,
    version: str,
    size: int | None,
    disks: int | None,
    cores: int | None,
    memory: int | None,
    disk_kind: str | None,
    lease: float | None,
    name: str | None,
    idle_minutes: int | None,
    allowed_sources: tuple[str, ...],
    options: dict[str, str],
    reuse_data_from: int | None,
    wait: bool,
    timeout: int,
    as_json: bool,
) -> None:
    """Launch PRODUCT VERSION (see `platter products`).

    With --wait it shows the cluster's progress and events until it is running, then how to
    connect; exit 0 when running, 1 when it failed."""
    client = connect(dict(LAUNCH_FLAGS))
    fields = version_of(client, product, version)["options"]["fields"]
    body: dict[str, Any] = {}
    for flag, value in (
        ("--size", size),
        ("--disks", disks),
        ("--cores", cores),
        ("--memory", memory),
    ):
        if value is not None:
            option = sizing_option(fields, flag, product, version)
            body[option] = value
            client.flags[option] = flag
    for option, value in options.items():
        body[option] = typed(fields.get(option), value)
        client.flags.setdefault(option, f"-o {option}")
    launch_keys = {
        "name": name,
        "disk_kind": disk_kind,
        "lease": lease,
        "reuse_data_from": reuse_data_from,
        "idle_minutes": idle_minutes,
        "allowed_sources": list(allowed_sources) or None,
    }
    body.update({key: value for key, value in launch_keys.items() if value is not None})
    cluster = client.post(f"products/{product}/{version}", body)
    if not wait:
        if as_json:
            return emit(cluster)
        click.echo(
            f"Cluster {cluster['id']} ({cluster['name']}) is {cluster['state']}: follow "
            f"it with `platter events {cluster['id']} -f`."
        )
        return None
    try:
        final = follow_launch(client, cluster, timeout, quiet=as_json)
    except KeyboardInterrupt:
        raise CliError(
            f"stopped waiting; cluster {cluster['id']} goes on launching "
            f"(`platter events {cluster['id']} -f`)",
            ExitCode.INTERRUPTED,
        ) from None
    finish(final, "running", client.url, as_json)
    return None


def sizing_option(fields: dict, flag: str, product: str, version: str) -> str:
    """The version's option behind --size/--disks/--cores/--memory: the one that sets that
    role property, the CESGA name first."""
    sets, cesga = SIZING[flag]
    if fields.get(cesga, {}).get("sets") == sets:
        return cesga
    for option, field in fields.items():
        if field.get("sets") == sets:
            return option
    raise CliError(
        f"{product} {version} has no option for {flag} (its options: "
        f"{', '.join(fields) or 'none'})",
        ExitCode.USAGE,
    )


def typed(field: dict | None, value: str) -> Any:
    """An -o value as the option's type says (the API checks it; unknown names go as text)."""
    kind = (field or {}).get("type")
    if kind == "bool":
        return value.strip().lower() in ("1", "true", "yes", "on")
    if kind == "int" or (kind == "choice" and re.fullmatch(r"-?\d+", value.strip())):
        try:
            return int(value)
        except ValueError:
            return value  # the API names the problem
    return value


def follow_launch(client: Api, cluster: dict, timeout: float, quiet: bool) -> dict:
    """Poll the cluster's state and events until it runs or ends, with a progress display."""
    done = life_cycle(client).launch_over
    if quiet:
        return wait_for(client, cluster["id"], done, "0", lambda e: None, lambda c: None, timeout)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TimeElapsedColumn(),
    )
    phases = life_cycle(client).launch_phases
    with Progress(*columns, console=render.out, transient=True) as progress:
        task = progress.add_task(
            f"cluster {cluster['id']}: {cluster['state']}", total=len(phases) - 1
        )

        def show_state(c: dict) -> None:
            step = phases.index(c["state"]) if c["state"] in phases else 0
            about = c["queue"]["reason"] if c.get("queue") else c.get("reason") or ""
            waiting = (
                f" ({c['queue']['position']} of {c['queue']['length']} in the queue)"
                if (c.get("queue"))
                else ""
            )
            text = f"cluster {c['id']} {c['name']}: {c['state']}{waiting}"
            progress.update(
                task, completed=step, description=escape(f"{text} — {about}" if about else text)
            )

        def show_event(event: dict) -> None:
            progress.console.print(render.event_line(event))

        return wait_for(client, cluster["id"], done, "0", show_event, show_state, timeout)


def wait_for(
    client: Api,
    cluster_id: int,
    done: set[str],
    since: str,
    show_event: Callable[[dict], None],
    show_state: Callable[[dict], None],
    timeout: float,
) -> dict:
    """The cluster once its state is in `done`, its events after `since` shown on the way."""
    deadline = time.monotonic() + timeout
    while True:
        cluster = client.get(f"clusters/{cluster_id}")
        since = show_events(client, cluster_id, since, show_event)  # all up to that state
        show_state(cluster)
        if cluster["state"] in done:
            return cluster
        if time.monotonic() > deadline:
            raise CliError(
                f"cluster {cluster_id} is still {cluster['state']} after {timeout:g} "
                f"s; it goes on (`platter events {cluster_id} -f`)",
                ExitCode.TIMEOUT,
                {"error": "timeout", "message": f"still {cluster['state']}", "cluster": cluster},
            )
        time.sleep(POLL_SECONDS)


def show_events(client: Api, cluster_id: int, since: str, show: Callable[[dict], None]) -> str:
    """Every event after the cursor, shown; the cursor after them."""
    while True:
        page = client.get(f"clusters/{cluster_id}/events", since=since, limit=1000)
        for event in page["events"]:
            show(event)
        if page["next"] == since or not page["events"]:
            return page["next"]
        since = page["next"]


def finish(cluster: dict, wanted: str, portal: str, as_json: bool) -> None:
    """The end of a --wait: the cluster (and how to connect when it runs); exit 1 when it
    ended anywhere but `wanted`."""
    reached = cluster["state"] == wanted
    if as_json:
        emit(cluster)
    elif reached:
        seconds = (cluster.get("provisioning") or {}).get("seconds")
        took = f" after {seconds:.1f} s" if seconds and wanted == "running" else ""
        render.out.print(
            Text.assemble(
                f"Cluster {cluster['id']} ({cluster['name']}) is ",
                render.state(cluster["state"]),
                took,
            )
        )
        if wanted == "running":
            render.out.print(render.connection(cluster, portal))
    if not reached:
        why = f": {cluster['reason']}" if cluster.get("reason") else ""
        error = CliError(
            f"cluster {cluster['id']} is {cluster['state']}, not {wanted}{why}", ExitCode.REFUSED
        )
        if as_json:  # the cluster is on stdout already; the message goes to stderr
            click.echo(f"platter: {error.message}", err=True)
            raise SystemExit(error.exit_code)
        raise error


# --- your clusters -------------------------------------------------------------------------


@app.command(name="ls")
@click.option("-a", "--all", "everything", is_flag=True, help="Destroyed clusters too.")
@click.option("--state", "states", multiple=True, help="Only clusters in this state (repeatable).")
@with_json
def list_clusters(everything: bool, states: tuple[str, ...], as_json: bool) -> None:
    """Your clusters (live ones unless --all or --state)."""
    client = connect({"state": "--state"})
    rows = list(client.pages("clusters", **({"state": list(states)} if states else {})))
    if not (everything or states):
        rows = [c for c in rows if c["state"] != "destroyed"]
    if as_json:
        return emit(rows)
    if not rows:
        click.echo("No clusters." + ("" if everything else " (`platter ls --all` for old ones)"))
        return None
    render.out.print(render.clusters(rows))
    return None


@app.command()
@click.argument("cluster")
@with_json
def show(cluster: str, as_json: bool) -> None:
    """A cluster: state, instances and their disks, how to connect, last events."""
    client = connect()
    body = client.get(f"clusters/{cluster_id(client, cluster)}")
    return emit(body) if as_json else render.out.print(render.cluster(body, client.url))


@app.command()
@click.argument("cluster")
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing new events until the cluster is destroyed or failed.",
)
@click.option(
    "--since",
    default="0",
    metavar="CURSOR",
    help="Only events after this cursor (a --json answer's `next`).",
)
@with_json
def events(cluster: str, follow: bool, since: str, as_json: bool) -> None:
    """A cluster's events, oldest first.

    With --json: {"events": [...], "next": CURSOR}; with -f one JSON object per line."""
    client = connect({"since": "--since"})
    cid = cluster_id(client, cluster)
    if not follow:
        found: list[dict] = []
        cursor = show_events(client, cid, since, found.append)
        if as_json:
            return emit({"events": found, "next": cursor})
        for event in found:
            render.out.print(render.event_line(event))
        return None
    show_one = emit_line if as_json else (lambda e: render.out.print(render.event_line(e)))
    while True:
        state = client.get(f"clusters/{cid}")["state"]
        since = show_events(client, cid, since, show_one)
        if state in life_cycle(client).ended:
            return None
        time.sleep(FOLLOW_POLL_SECONDS)


@app.command()
@click.argument("cluster")
@click.option(
    "-i", "--instance", help="An instance's hostname, e.g. worker-0 (default: the first)."
)
@click.option(
    "-n",
    "--tail",
    type=click.IntRange(1, 10000),
    default=100,
    show_default=True,
    help="How many of the last lines.",
)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing new lines until the container stops or the cluster ends.",
)
@click.option("-t", "--timestamps", is_flag=True, help="Start each line with its timestamp.")
@with_json
def logs(
    cluster: str, instance: str | None, tail: int, follow: bool, timestamps: bool, as_json: bool
) -> None:
    """An instance's container log (stdout and stderr as written).

    With --json: {"lines": [{"at", "line"}], "next": CURSOR}; with -f one JSON object per
    line."""
    client = connect({"instance": "--instance", "tail": "--tail"})
    cid = cluster_id(client, cluster)
    path = f"clusters/{cid}/logs"
    query: dict[str, Any] = {"tail": tail, "timestamps": "true"}
    if instance:
        query["instance"] = instance

    def parsed(raw: str) -> dict:
        at, _, line = raw.partition(" ")
        return {"at": at, "line": line}

    if not follow:
        with client.stream_lines(path, query, 60) as lines:
            rows = [parsed(raw) for raw in lines if raw]
        if as_json:
            return emit({"lines": rows, "next": rows[-1]["at"] if rows else None})
        for row in rows:
            click.echo(f"{row['at']} {row['line']}" if timestamps else row["line"])
        return None
    cursor: str | None = None
    while True:
        asked = {**query, "follow": "true", "seconds": LOG_FOLLOW_SECONDS}
        if cursor:
            asked.update(since=cursor, tail=10000)  # everything after the last line shown
        started = time.monotonic()
        try:
            with client.stream_lines(path, asked, LOG_FOLLOW_SECONDS) as lines:
                for raw in lines:
                    if not raw:
                        continue
                    row = parsed(raw)
                    cursor = row["at"]
                    if as_json:
                        emit_line(row)
                    else:
                        click.echo(f"{row['at']} {row['line']}" if timestamps else row["line"])
                        sys.stdout.flush()
        except CliError as error:
            if cursor is not None and (error.body or {}).get("error") == "no_container":
                return None  # the container went away after we followed it
            raise
        if client.get(f"clusters/{cid}")["state"] not in life_cycle(client).logging:
            return None
        if time.monotonic() - started < FOLLOW_POLL_SECONDS:  # a stopped container ends at once
            time.sleep(FOLLOW_POLL_SECONDS)


@app.command(context_settings={"ignore_unknown_options": True})
@click.argument("cluster")
@click.option(
    "-i",
    "--identity",
    type=click.Path(dir_okay=False),
    help="Your private key (ssh's -i), if ssh does not find it itself.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@with_json
def ssh(cluster: str, identity: str | None, command: tuple[str, ...], as_json: bool) -> None:
    """Log in to the cluster's ssh instance with the portal's ssh command (or run COMMAND
    there). Your keys are those of the portal's SSH keys page.

    Host keys are remembered per cluster (trust on first use) in the config folder, so a new
    cluster on an old address does not trip ssh's warning. With --json it prints the command
    instead of running it."""
    client = connect()
    body = client.get(f"clusters/{cluster_id(client, cluster)}")
    login = (body.get("connection") or {}).get("ssh")
    if not login:
        raise CliError(
            f"cluster {body['id']} ({body['product']} {body['version']}, "
            f"{body['state']}) has no ssh login: its product runs no sshd, or it is "
            "not placed yet",
            ExitCode.REFUSED,
        )
    program = shutil.which("ssh")
    known = config.config_dir() / "known_hosts" / f"cluster-{body['id']}"
    argv = [
        program or "ssh",
        "-o",
        f"UserKnownHostsFile={known}",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-p",
        str(login["port"]),
    ]
    if identity:
        argv += ["-i", identity]
    argv += [f"{login['user']}@{login['address']}", *command]
    if as_json:
        return emit({"ssh": login, "argv": argv})
    if program is None:
        raise CliError("no ssh on PATH: install an OpenSSH client", ExitCode.REFUSED)
    known.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    sys.stdout.flush()
    os.execv(program, argv)  # noqa: S606 (the user's own ssh, with the portal's login)
    return None


def lifecycle(
    wanted: str,
    cluster: str,
    wait: bool,
    timeout: int,
    as_json: bool,
    call: Callable[[Api, int], dict],
) -> None:
    """stop, start and destroy: the request, then with --wait its end."""
    client = connect()
    cid = cluster_id(client, cluster)
    since = show_events(client, cid, "0", lambda e: None) if wait else "0"
    body = call(client, cid)
    if not wait:
        if as_json:
            return emit(body)
        click.echo(f"Cluster {cid} ({body['name']}) is {body['state']}.")
        return None
    show = (lambda e: None) if as_json else (lambda e: render.out.print(render.event_line(e)))
    done = {wanted, *life_cycle(client).ended}
    final = wait_for(client, cid, done, since, show, lambda c: None, timeout)
    finish(final, wanted, client.url, as_json)
    return None


@app.command()
@click.argument("cluster")
@click.option("--minutes", type=click.IntRange(1), help="Stop (data kept) after this long unused.")
@click.option("--off", is_flag=True, help="No idle limit of its own (a group default may apply).")
@click.option("--keep-running", is_flag=True, help="Start the idle clock again now.")
@with_json
def idle(cluster: str, minutes: int | None, off: bool, keep_running: bool, as_json: bool) -> None:
    """A cluster's idle stop: show it, set the limit, or keep the cluster running now."""
    if sum((minutes is not None, off, keep_running)) > 1:
        raise click.UsageError("give one of --minutes, --off and --keep-running")
    client = connect()
    cid = cluster_id(client, cluster)
    if keep_running:
        body = client.post(f"clusters/{cid}/keep-running")
    elif minutes is not None or off:
        body = client.post(f"clusters/{cid}/idle", {"minutes": minutes})
    else:
        body = client.get(f"clusters/{cid}")["idle"]
    return emit(body) if as_json else click.echo(render.idle(body))


AUTOSCALING_FLAGS = {
    "min_workers": "--min",
    "max_workers": "--max",
    "cooldown_seconds": "--cooldown",
    "scale_up_factor": "--up",
    "scale_down_factor": "--down",
    "min_change": "--min-change",
    "decommission_timeout_seconds": "--decommission-timeout",
}


@app.command()
@click.argument("cluster")
@click.option("--min", "min_workers", type=click.IntRange(0), help="Fewest workers.")
@click.option("--max", "max_workers", type=click.IntRange(0), help="Most workers.")
@click.option(
    "--cooldown",
    "cooldown_seconds",
    type=click.IntRange(1),
    help="Seconds between decisions (>= 120).",
)
@click.option(
    "--up", "scale_up_factor", type=click.FloatRange(0, 1), help="Scale-up factor (0-1, default 1)."
)
@click.option(
    "--down",
    "scale_down_factor",
    type=click.FloatRange(0, 1),
    help="Scale-down factor (0-1, default 1).",
)
@click.option(
    "--min-change", "min_change", type=click.IntRange(1), help="Smallest change made (workers)."
)
@click.option(
    "--decommission-timeout",
    "decommission_timeout_seconds",
    type=click.IntRange(0),
    help="Seconds a drain may take.",
)
@click.option("--off", is_flag=True, help="Take the policy away (the size stays).")
@with_json
def autoscale(cluster: str, off: bool, as_json: bool, **given: Any) -> None:
    """A cluster's autoscaling policy: show it, set it (--min and --max at least), or --off.
    Every cooldown the pending work its product reports (YARN's pending memory, the cores
    Spark's applications wait for) decides a resize; the events say each decision."""
    fields = {name: given[name] for name in AUTOSCALING_FLAGS if given[name] is not None}
    if off and fields:
        raise click.UsageError("give --off alone")
    client = connect(AUTOSCALING_FLAGS)
    cid = cluster_id(client, cluster)
    if off:
        client.delete(f"clusters/{cid}/autoscaling")
        body = None
    elif fields:
        if "min_workers" not in fields or "max_workers" not in fields:
            raise click.UsageError("a policy needs --min and --max")
        body = client.put(f"clusters/{cid}/autoscaling", fields)
    else:
        body = client.get(f"clusters/{cid}")["autoscaling"]
    return emit(body) if as_json else click.echo(render.autoscaling(body))


@app.command()
@click.argument("cluster")
@click.argument("sources", nargs=-1, metavar="[CIDR]...")
@click.option("--none", "nobody", is_flag=True, help="Allow no source (members, portal, SSH only).")
@with_json
def allow(cluster: str, sources: tuple[str, ...], nobody: bool, as_json: bool) -> None:
    """Who may connect to CLUSTER's ports: show the list, or replace it with the CIDRs given
    (IPv4 addresses or ranges). Its members, the portal and the site's ranges always may; SSH
    (22) answers everyone with your keys."""
    if sources and nobody:
        raise click.UsageError("give CIDRs or --none, not both")
    client = connect({"allowed_sources": "CIDR"})
    cid = cluster_id(client, cluster)
    if sources or nobody:
        body = client.put(f"clusters/{cid}/allowed-sources", {"allowed_sources": list(sources)})
    else:
        shown = client.get(f"clusters/{cid}")
        body = {key: shown[key] for key in ("allowed_sources", "site_sources")}
    return emit(body) if as_json else click.echo(render.sources(body))


WAIT = click.option("--wait", is_flag=True, help="Return once it got there (exit 1 if not).")
TIMEOUT = click.option(
    "--timeout",
    type=click.IntRange(1),
    default=600,
    show_default=True,
    help="With --wait: give up after this many seconds (exit 6).",
)


@app.command()
@click.argument("cluster")
@WAIT
@TIMEOUT
@with_json
def stop(cluster: str, wait: bool, timeout: int, as_json: bool) -> None:
    """Stop the containers; disks, addresses and the lease stay."""
    lifecycle(
        "stopped",
        cluster,
        wait,
        timeout,
        as_json,
        lambda client, cid: client.post(f"clusters/{cid}/stop"),
    )


@app.command()
@click.argument("cluster")
@WAIT
@TIMEOUT
@with_json
def start(cluster: str, wait: bool, timeout: int, as_json: bool) -> None:
    """Start a stopped cluster again."""
    lifecycle(
        "running",
        cluster,
        wait,
        timeout,
        as_json,
        lambda client, cid: client.post(f"clusters/{cid}/start"),
    )


@app.command()
@click.argument("cluster")
@click.option(
    "--workers",
    type=click.IntRange(0),
    help="Instances of its scalable role (workers; nodes for Cassandra).",
)
@click.option("--role", help="The role whose instances get new --cores or --memory-mb.")
@click.option("--cores", type=click.IntRange(1), help="New cores for each instance of --role.")
@click.option(
    "--memory-mb", type=click.IntRange(1), help="New memory (MB) for each instance of --role."
)
@WAIT
@TIMEOUT
@with_json
def resize(
    cluster: str,
    workers: int | None,
    role: str | None,
    cores: int | None,
    memory_mb: int | None,
    wait: bool,
    timeout: int,
    as_json: bool,
) -> None:
    """Grow or shrink a running cluster to --workers instances, or give every instance of
    --role new --cores and/or --memory-mb. A shrink first drains the leaving ones (HDFS
    decommission); cores change live, memory live or by restarting the instances one at a
    time (the product decides; the web preview says which). With --wait, exit 1 when the
    resize failed."""
    vertical = role is not None or cores is not None or memory_mb is not None
    if workers is not None and vertical:
        raise click.UsageError("give either --workers or --role with --cores/--memory-mb")
    if workers is None and not (role and (cores or memory_mb)):
        raise click.UsageError("give --workers, or --role with --cores and/or --memory-mb")
    flags = {"workers": "--workers", "role": "--role", "cores": "--cores"}
    client = connect({**flags, "memory_mb": "--memory-mb"})
    body: dict = {"workers": workers} if workers is not None else {"role": role}
    if cores is not None:
        body["cores"] = cores
    if memory_mb is not None:
        body["memory_mb"] = memory_mb
    grow_or_shrink(client, cluster, "resize", body, wait, timeout, as_json)


def grow_or_shrink(
    client: Api,
    cluster: str,
    verb: str,
    body: dict | None,
    wait: bool,
    timeout: int,
    as_json: bool,
) -> None:
    """POST clusters/<id>/<verb> (a resize, or adding a notebook) and, with wait, follow the
    events until it ends: exit 1 when it failed (its "resize failed" event)."""
    cid = cluster_id(client, cluster)
    since = show_events(client, cid, "0", lambda e: None) if wait else "0"
    answer = client.post(f"clusters/{cid}/{verb}", body)
    if not wait:
        if as_json:
            return emit(answer)
        click.echo(f"Cluster {cid} ({answer['name']}) is {answer['state']}.")
        return None
    failed: list[str] = []

    def show(event: dict) -> None:
        if event["message"].startswith("resize failed"):
            failed.append(event["message"])
        if not as_json:
            render.out.print(render.event_line(event))

    done = {"running", *life_cycle(client).ended}
    final = wait_for(client, cid, done, since, show, lambda c: None, timeout)
    if failed:
        raise CliError(failed[-1], ExitCode.REFUSED, {"error": "resize_failed", "cluster": final})
    finish(final, "running", client.url, as_json)
    return None


@app.group()
def notebook() -> None:
    """A Spark cluster's notebook (JupyterLab, opened from the cluster page)."""


@notebook.command("add")
@click.argument("cluster")
@WAIT
@TIMEOUT
@with_json
def notebook_add(cluster: str, wait: bool, timeout: int, as_json: bool) -> None:
    """Add a notebook to a running Spark cluster launched without one: one more instance
    (1 core, 2 GB, a disk) from your quota. With --wait, exit 1 when adding it failed."""
    client = connect()
    grow_or_shrink(client, cluster, "notebook", None, wait, timeout, as_json)


@app.command()
@click.argument("cluster")
@click.argument("hours", callback=parse_hours, metavar="DURATION")
@with_json
def extend(cluster: str, hours: float, as_json: bool) -> None:
    """Push the lease's end DURATION further (hours, or 30m, 4h, 2d)."""
    client = connect({"hours": "DURATION"})
    cid = cluster_id(client, cluster)
    body = client.post(f"clusters/{cid}/extend", {"hours": hours})
    if as_json:
        emit({"id": cid, **body})
    else:
        click.echo(f"Cluster {cid}'s lease now ends {render.when(body['expires_at'])}.")


@app.command()
@click.argument("cluster")
@click.option(
    "--keep-data",
    is_flag=True,
    help="Keep the disks' data for a later launch --reuse-data-from (default: wipe).",
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask (needed without a terminal).")
@WAIT
@TIMEOUT
@with_json
def destroy(
    cluster: str, keep_data: bool, yes: bool, wait: bool, timeout: int, as_json: bool
) -> None:
    """Destroy the cluster: containers, addresses and disks go back to the pool, its data
    wiped unless --keep-data."""
    if not yes:
        what = "keeping its data" if keep_data else "WIPING its disks"
        if not sys.stdin.isatty():
            raise CliError(
                f"destroying cluster {cluster} ({what}) needs --yes when there is "
                "no terminal to ask",
                ExitCode.USAGE,
            )
        click.confirm(f"Destroy cluster {cluster}, {what}?", abort=True)
    lifecycle(
        "destroyed",
        cluster,
        wait,
        timeout,
        as_json,
        lambda client, cid: client.delete(f"clusters/{cid}", keep_data=str(keep_data).lower()),
    )


# --- your SSH keys -----------------------------------------------------------------------


@app.group()
def keys() -> None:
    """Your public SSH keys: they open your clusters' ssh logins (`platter ssh`)."""


@keys.command(name="ls")
@with_json
def list_keys(as_json: bool) -> None:
    """Your public keys."""
    rows = list(connect().pages("ssh-keys"))
    if as_json:
        return emit(rows)
    if not rows:
        click.echo("No SSH keys: add one with `platter keys add ~/.ssh/id_ed25519.pub`.")
        return None
    render.out.print(render.ssh_keys(rows))
    return None


@keys.command(name="add")
@click.argument("public_key_file", type=click.File("r"), metavar="FILE")
@click.option("--name", help="What to call it (default: the key's comment).")
@with_json
def add_key(public_key_file: Any, name: str | None, as_json: bool) -> None:
    """Add the public key in FILE (e.g. ~/.ssh/id_ed25519.pub; - reads stdin). Running
    clusters get it within seconds."""
    client = connect({"public_key": "FILE"})
    body = client.post("ssh-keys", {"public_key": public_key_file.read(), "name": name or ""})
    if as_json:
        return emit(body)
    click.echo(f"Added key {body['id']} ({body['name'] or body['type']}, {body['fingerprint']}).")
    return None


@keys.command(name="rm")
@click.argument("key_id", type=int, metavar="ID")
@with_json
def remove_key(key_id: int, as_json: bool) -> None:
    """Remove key ID (see `platter keys ls`); running clusters drop it within seconds."""
    connect().delete(f"ssh-keys/{key_id}")
    if as_json:
        return emit({"id": key_id, "deleted": True})
    click.echo(f"Removed key {key_id}.")
    return None
