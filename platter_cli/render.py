"""How the commands show API answers to people (tables, panels); --json bypasses all of it."""

from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "info": ""}
STATE_STYLES = {
    "running": "green",
    "failed": "bold red",
    "degraded": "yellow",
    "destroyed": "dim",
    "queued": "cyan",
    "stopped": "blue",
}

out = Console(highlight=False, soft_wrap=False)


def when(stamp: str | None) -> str:
    """An API timestamp in the local time zone, to the second."""
    if not stamp:
        return "-"
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return stamp


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLES.get(name, ""))


def event_line(event: dict) -> Text:
    line = Text(f"{when(event.get('at'))}  ", style="dim")
    level = event.get("level", "info")
    line.append(f"{level:<7} ", style=LEVEL_STYLES.get(level, ""))
    line.append(str(event.get("message", "")))
    return line


def products(rows: list[dict]) -> Table:
    table = Table("product", "versions", "title", box=None, pad_edge=False)
    for product in rows:
        table.add_row(product["name"], ", ".join(product["versions"]), product["title"])
    return table


def version(body: dict) -> Group:
    head = Text.assemble((f"{body['product']} {body['version']}", "bold"), f"  {body['title']}")
    roles = Table(
        "role",
        "instances",
        "cores",
        "memory MB",
        "disks",
        box=None,
        pad_edge=False,
        title="Roles",
        title_justify="left",
    )
    for role in body.get("roles", []):
        roles.add_row(
            role["name"],
            _span(role.get("min"), role.get("max"), role.get("default")),
            _resource(role.get("cores"), 1),
            _resource(role.get("memory_mb"), 64),
            _resource(role.get("disks"), 0),
        )
    options = Table(
        "option",
        "default",
        "allowed",
        "what",
        box=None,
        pad_edge=False,
        title="Options (launch … -o NAME=VALUE)",
        title_justify="left",
    )
    for name, field in body.get("options", {}).get("fields", {}).items():
        allowed = field.get("choices") or _span(field.get("min"), field.get("max"))
        options.add_row(
            name,
            str(field.get("default", "")),
            str(allowed or field.get("type")),
            field.get("description", ""),
        )
    return Group(
        head,
        Text(body.get("description", ""), style="dim"),
        Text(""),
        roles,
        Text(""),
        options,
        Text(""),
        capabilities(body),
    )


def capabilities(body: dict) -> Text:
    """What its clusters do besides run: resize (which roles), jobs (which kinds), notebook."""
    resizes = ", ".join(body.get("resizable_roles") or []) or "no role"
    jobs = ", ".join(body.get("job_kinds") or []) or "none"
    notebook = "yes (`platter notebook add`)" if body.get("notebook") else "no"
    return Text.assemble(
        ("Resizes: ", "bold"),
        f"{resizes}\n",
        ("Jobs: ", "bold"),
        f"{jobs}\n",
        ("Notebook: ", "bold"),
        notebook,
    )


def clusters(rows: list[dict]) -> Table:
    table = Table(
        "id",
        "name",
        "product",
        "state",
        "created",
        "lease ends",
        "reason",
        box=None,
        pad_edge=False,
    )
    for c in rows:
        table.add_row(
            str(c["id"]),
            c["name"],
            f"{c['product']} {c['version']}",
            state(c["state"]),
            when(c["created"]),
            when(c.get("expires_at")),
            c.get("reason") or "",
        )
    return table


def cluster(c: dict, portal: str) -> Group:
    """`platter show`: the cluster, its instances, how to reach it and its last events."""
    parts: list[Any] = [
        Text.assemble(
            (f"{c['name']}", "bold"),
            f"  (cluster {c['id']}, {c['product']} {c['version']}, owner {c['owner']})",
        ),
        Text.assemble(
            "state: ", state(c["state"]), f"  — {c['reason']}" if c.get("reason") else ""
        ),
        Text(f"created {when(c['created'])}, lease ends {when(c.get('expires_at'))}"),
    ]
    if c.get("queue"):
        q = c["queue"]
        parts.append(
            Text(
                f"queued: {q['position']} of {q['length']} ({q['order']}): {q['reason']}",
                style="cyan",
            )
        )
    if c.get("provisioning"):
        p = c["provisioning"]
        phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in p["phases"].items())
        done = "to running" if p["running"] else "so far"
        parts.append(Text(f"provisioning: {p['seconds']:.1f} s {done} ({phases})"))
    instances = Table(
        "instance",
        "node",
        "address",
        "container",
        "cores",
        "memory MB",
        "disks",
        box=None,
        pad_edge=False,
        title="Instances",
        title_justify="left",
    )
    for i in c.get("instances", []):
        disks = ", ".join(f"{d['destination']} on {d['node']} ({d['kind']})" for d in i["disks"])
        instances.add_row(
            i["hostname"] or f"{i['role']}-{i['index']}",
            i["node"] or "-",
            i["address"] or "-",
            i["container_state"],
            str(i["cores"]),
            str(i["memory_mb"]),
            disks or f"{i['disk_kind']} (none held)",
        )
    parts += [Text(""), instances, Text(""), connection(c, portal)]
    events = c.get("events", [])[-5:]
    if events:
        parts += [Text(""), Text("Last events (platter events for all):", style="bold")]
        parts += [event_line(e) for e in events]
    return Group(*parts)


def connection(c: dict, portal: str) -> Group:
    """Endpoints, connection strings, web UIs (through the portal), credentials and the ssh
    command."""
    details = c.get("connection") or {}
    lines: list[Any] = [Text("Connect", style="bold")]
    for e in c.get("endpoints", []):
        where = e.get("url") or f"{e['address']}:{e['port']}"
        lines.append(Text(f"  {e['name']} ({e['hostname']}): {where}"))
    for s in details.get("strings", []):
        lines.append(
            Text(f"  {s['name']}{' ' + s['hostname'] if s['hostname'] else ''}: {s['value']}")
        )
    for ui in details.get("web_uis", []):
        url = ui.get("url", "")
        url = f"{portal}{url}" if url.startswith("/") else url
        lines.append(Text(f"  web UI {ui.get('name', '')} ({ui.get('hostname', '')}): {url}"))
    credentials = details.get("credentials")
    if credentials:
        lines.append(
            Text(
                f"  credentials: user {credentials['username']}, password {credentials['password']}"
            )
        )
    ssh = details.get("ssh")
    if ssh:
        lines.append(Text(f"  ssh: platter ssh {c['id']}   (or: {ssh['command']})"))
    if len(lines) == 1:
        lines.append(
            Text(
                "  nothing to connect to yet"
                if c["state"] not in ("destroyed", "failed")
                else "  nothing: the cluster is gone",
                style="dim",
            )
        )
    return Group(*lines)


def quota(body: dict) -> Table:
    scopes = [body["user"], *body.get("groups", [])]
    table = Table(
        "limit", *(s["scope"] + " (used / max)" for s in scopes), box=None, pad_edge=False
    )
    for name in scopes[0]["limits"]:
        cells = []
        for s in scopes:
            limit = s["limits"].get(name)
            cells.append(f"{s['used'].get(name, 0)} / {'unlimited' if limit is None else limit}")
        table.add_row(name.removeprefix("max_").replace("_", " "), *cells)
    return table


def usage(body: dict) -> Table:
    table = Table(
        body["group_by"],
        "core-h",
        "memory GB-h",
        "HDD-h",
        "SSD-h",
        box=None,
        pad_edge=False,
        title=f"usage {body['from']} to {body['to']} (UTC days)",
    )
    for t in [*body["totals"], {"key": "total", **body["total"]}]:
        table.add_row(t["key"] or "(none)", *(f"{t[f]:.2f}" for f in USAGE_FIGURES))
    return table


USAGE_FIGURES = ("core_h", "mem_gb_h", "hdd_h", "ssd_h")


def idle(body: dict) -> str:
    """A cluster's idle stop in a sentence or two."""
    limit = body.get("effective_limit_minutes")
    if not limit:
        return "No idle limit: it runs until stopped, destroyed or its lease ends."
    whose = " (your group's default)" if body.get("from_group") else ""
    lines = [f"Stops (data kept) after {limit} min unused{whose}."]
    if body.get("last_used_at"):
        lines.append(f"Last used {body['last_used_at']} ({body.get('last_signal') or '-'}).")
    if body.get("stops_at"):
        warned = " You were warned." if body.get("warned") else ""
        lines.append(f"Stops at {body['stops_at']} if unused.{warned}")
    return "\n".join(lines)


def sources(body: dict) -> str:
    """Who may connect to a cluster's ports, besides its members."""
    allowed = ", ".join(body.get("allowed_sources") or []) or "nobody else"
    site = ", ".join(body.get("site_sources") or []) or "none"
    return (
        f"Allowed sources: {allowed}\n"
        f"The site's ranges: {site}\n"
        "Its ports answer its own members, the portal and these sources; SSH (22) answers "
        "everyone with your keys."
    )


def _span(low: Any, high: Any, default: Any = None) -> str:
    text = f"{low}" if low == high else f"{low}-{high}"
    if low is None and high is None:
        text = ""
    return f"{text} (default {default})" if default is not None else text


def _resource(spec: Any, floor: int) -> str:
    """A role's cores, memory or disks: {"default", "max", optional "min"} (the catalog's
    floor when it has none)."""
    if not isinstance(spec, dict):
        return str(spec if spec is not None else "")
    return _span(spec.get("min", floor), spec.get("max"), spec.get("default"))


def ssh_keys(rows: list[dict]) -> Table:
    table = Table("id", "name", "type", "fingerprint", "added", box=None, pad_edge=False)
    for key in rows:
        table.add_row(
            str(key["id"]), key["name"], key["type"], key["fingerprint"], when(key["created"])
        )
    return table


def autoscaling(policy: dict | None) -> str:
    """A cluster's autoscaling policy and its last decision, or that it has none."""
    if not policy:
        return "No autoscaling policy: the cluster keeps the size it is given."
    lines = [
        f"Autoscaling: {policy['min_workers']} to {policy['max_workers']} workers, deciding "
        f"every {policy['cooldown_seconds']} s (scale up x{policy['scale_up_factor']:g}, down "
        f"x{policy['scale_down_factor']:g}, at least {policy['min_change']} at a time; drains "
        f"may take {policy['decommission_timeout_seconds']} s).",
    ]
    if policy.get("decision"):
        lines.append(f"Last decision ({policy['decided_at']}): {policy['decision']}")
    else:
        lines.append("No decision yet: the first comes one cooldown after the policy was set.")
    return "\n".join(lines)
