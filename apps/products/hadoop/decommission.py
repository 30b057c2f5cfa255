"""Hadoop's side of a resize: HDFS and YARN decommission of leaving workers, and new workers
let back in. Node work goes through the resize's Operator (apps/products/base.py)."""

import json
import shlex
import time

from django.conf import settings

from ..base import Member, Operator, ResizeFailed

NAMENODE_INFO = (
    "import json, urllib.request; "
    "u = 'http://localhost:9870/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo'; "
    "b = json.load(urllib.request.urlopen(u, timeout=10))['beans'][0]; "
    "print(json.dumps({k: json.loads(b[k]) for k in ('LiveNodes', 'DecomNodes')}))"
)
# The NodeManagers YARN still drains gracefully (DECOMMISSIONING: their containers run on,
# no new ones start), by hostname, with the containers each still runs.
YARN_DRAINING = (
    "import json, urllib.request; "
    "u = 'http://localhost:8088/ws/v1/cluster/nodes?states=DECOMMISSIONING'; "
    "n = (json.load(urllib.request.urlopen(u, timeout=10)).get('nodes') or {}).get('node', []); "
    "print(json.dumps({x['nodeHostName']: x.get('numContainers', 0) for x in n}))"
)
EXCLUDE = "/opt/hadoop/etc/hadoop/platter.exclude"
YARN_EXCLUDE = "/opt/hadoop/etc/hadoop/platter.yarn-exclude"
# The exclude files named in the master's configuration (read again by every refreshNodes).
ADD_EXCLUDE_PROPERTIES = f"""
import re
for name, key, path in (("hdfs-site.xml", "dfs.hosts.exclude", "{EXCLUDE}"),
                        ("yarn-site.xml", "yarn.resourcemanager.nodes.exclude-path",
                         "{YARN_EXCLUDE}")):
    f = "/opt/hadoop/etc/hadoop/" + name
    text = open(f).read()
    if key not in text:
        prop = "  <property><name>%s</name><value>%s</value></property>\\n" % (key, path)
        open(f, "w").write(text.replace("</configuration>", prop + "</configuration>"))
    open(path, "a").close()
"""
# Adds (argv[1] "add") or removes the given lines in both exclude files; exits 0 only when a
# file changed, so the NameNode and ResourceManager are asked to read them only then.
EDIT_EXCLUDES = f"""
import os, sys
add, changed = sys.argv[1] == "add", False
for path, names in (("{EXCLUDE}", sys.argv[2].split()), ("{YARN_EXCLUDE}", sys.argv[3].split())):
    old = open(path).read().split() if os.path.exists(path) else []
    new = sorted(set(old) | set(names)) if add else [n for n in old if n not in names]
    if sorted(new) != sorted(old):
        open(path, "w").write("".join(n + "\\n" for n in new))
        changed = True
sys.exit(0 if changed else 3)
"""


def master(op: Operator, role: str = "master") -> Member:
    found = next((m for m in op.members() if m.role == role), None)
    if found is None:
        raise ResizeFailed(f"the cluster has no running {role}")
    return found


def hdfs_nodes(op: Operator, master: Member) -> dict:
    """The NameNode's view of its DataNodes: LiveNodes and DecomNodes, by name."""
    output = op.run(master, ["python3", "-c", NAMENODE_INFO], 60)
    return json.loads(output.strip().splitlines()[-1])


def yarn_draining(op: Operator, master: Member) -> dict[str, int]:
    """The ResourceManager's view: NodeManagers still decommissioning, and their containers."""
    output = op.run(master, ["python3", "-c", YARN_DRAINING], 60)
    return json.loads(output.strip().splitlines()[-1])


def match(nodes_by_name: dict, member: Member) -> dict | None:
    for name, info in nodes_by_name.items():
        if name.split(":")[0] == member.hostname or (
            member.ip and str(info.get("xferaddr", "")).split(":")[0] == member.ip
        ):
            return info
    return None


def drain(op: Operator, leaving: list[Member]) -> None:
    """HDFS decommission of the leaving DataNodes and YARN's graceful one of their
    NodeManagers (the tasks running there finish; none start there meanwhile): refused when
    their data would not fit on the workers that stay; done once the NameNode says each is
    Decommissioned and YARN runs nothing more on them, with the blocks and containers left as
    events; past RESIZE_DRAIN_SECONDS they go back into service and the resize fails."""
    head = master(op)
    # A resumed resize: containers stopped only once decommissioned (below) are done.
    leaving = [m for m in leaving if op.running(m)]
    if not leaving:
        return
    live = hdfs_nodes(op, head)["LiveNodes"]
    used = sum((match(live, m) or {}).get("usedSpace", 0) for m in leaving)
    staying = [
        info for name, info in live.items() if not any(match({name: info}, m) for m in leaving)
    ]
    free = sum(info.get("remaining", 0) for info in staying)
    if used > free:
        raise ResizeFailed(
            f"the HDFS data on the leaving workers ({used / 2**30:.2f} GiB) would not fit on "
            f"the {len(staying)} that stay ({free / 2**30:.2f} GiB free)"
        )
    ips = [m.ip for m in leaving if m.ip]
    names = [m.hostname for m in leaving]
    op.run(head, ["python3", "-c", ADD_EXCLUDE_PROPERTIES])
    set_excluded(op, head, ips, names, True)
    op.event(f"HDFS and YARN decommission of {', '.join(names)} started")
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    said = ""
    while True:
        report = hdfs_nodes(op, head)
        states = [(match(report["LiveNodes"], m) or {}).get("adminState", "") for m in leaving]
        draining = yarn_draining(op, head)
        running = sum(draining.get(name, 0) for name in names)
        yarn_done = not any(name in draining for name in names)
        if yarn_done and all(state == "Decommissioned" for state in states):
            break
        left = sum(
            int((match(report["DecomNodes"], m) or {}).get("underReplicatedBlocks", 0))
            for m in leaving
        )
        progress = f"HDFS decommission: {left} blocks left to replicate ({', '.join(states)})"
        if not yarn_done:
            progress += f"; YARN: {running} containers still running on them"
        if progress != said:
            op.event(progress)
            said = progress
        if time.monotonic() > deadline:
            set_excluded(op, head, ips, names, False)  # back into service
            raise ResizeFailed(
                f"the decommission did not end in {settings.RESIZE_DRAIN_SECONDS} s "
                f"({left} blocks left to replicate, {running} YARN containers still "
                "running); the workers are back in service"
            )
        time.sleep(settings.RESIZE_POLL_SECONDS)
    op.event(
        f"{', '.join(names)} decommissioned: their blocks have copies elsewhere and their "
        "YARN tasks ended",
    )
    # They stay excluded once stopped (Decommissioned, then dead: the NameNode never puts
    # them back into service); a later worker given the same address is let in (admit).
    op.stop(leaving)


def set_excluded(op: Operator, master: Member, ips: list[str], names: list[str], add: bool) -> None:
    """Add the workers to the exclude files (or take them out) and have the NameNode and the
    ResourceManager read them when they changed. YARN decommissions gracefully: the
    ResourceManager lets the containers running there end (for RESIZE_DRAIN_SECONDS at
    most, which drain waits for) instead of killing them."""
    edit = shlex.join(
        ["python3", "-c", EDIT_EXCLUDES, "add" if add else "remove", " ".join(ips), " ".join(names)]
    )
    yarn = ["yarn", "rmadmin", "-refreshNodes"]
    if add:
        yarn += ["-g", str(settings.RESIZE_DRAIN_SECONDS), "-server"]
    script = f"if {edit}; then hdfs dfsadmin -refreshNodes && {shlex.join(yarn)}; fi"
    op.run(master, ["sh", "-c", script], 180)


def admit(op: Operator, added: list[Member]) -> None:
    """New workers whose address a removed one had are taken out of the exclude files."""
    head = master(op)
    set_excluded(op, head, [m.ip for m in added if m.ip], [m.hostname for m in added], False)
