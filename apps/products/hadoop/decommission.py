"""Hadoop's side of a resize: HDFS and YARN decommission of leaving workers, and new workers
let back in, by the image's admin command (hadoop-admin) on the master. Node work goes through
the resize's Operator (apps/products/base.py)."""

import time

from django.conf import settings

from ..base import Member, Operator, ResizeFailed, admin

ADMIN = "hadoop-admin"  # deploy/images/hadoop/rootfs/opt/platter/bin/hadoop-admin


def master(op: Operator, role: str = "master") -> Member:
    found = next((m for m in op.members() if m.role == role), None)
    if found is None:
        raise ResizeFailed(f"the cluster has no running {role}")
    return found


def hdfs_nodes(op: Operator, master: Member) -> dict:
    """The NameNode's view of its DataNodes: LiveNodes and DecomNodes, by name."""
    return admin(op, master, [ADMIN, "datanodes"], 60)


def yarn_draining(op: Operator, master: Member) -> dict[str, int]:
    """The ResourceManager's view: NodeManagers still decommissioning, and their containers."""
    return admin(op, master, [ADMIN, "yarn-draining"], 60)


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
    events; past the drain's time (op.drain_seconds) they go back into service and the resize
    fails."""
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
    set_excluded(op, head, ips, names, True)
    op.event(f"HDFS and YARN decommission of {', '.join(names)} started")
    deadline = time.monotonic() + op.drain_seconds
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
                f"the decommission did not end in {op.drain_seconds} s "
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
    command = [ADMIN, "exclude", "add" if add else "remove", "--ips", *ips, "--names", *names]
    admin(op, master, [*command, "--graceful", str(op.drain_seconds)], 180)


def admit(op: Operator, added: list[Member]) -> None:
    """New workers whose address a removed one had are taken out of the exclude files."""
    head = master(op)
    set_excluded(op, head, [m.ip for m in added if m.ip], [m.hostname for m in added], False)


def restarted(op: Operator, member: Member) -> None:
    """A worker restarted with new figures is back once its DataNode registered with the
    NameNode again (the NameNode still lists the old one as live for minutes, so its count
    says nothing) and the product's checks pass (every DataNode live, every NodeManager
    active); ResizeFailed past RESIZE_DRAIN_SECONDS."""
    if member.role == "worker":
        deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
        while True:
            try:
                if admin(op, member, [ADMIN, "datanode"], 30).get("registered"):
                    break
            except ResizeFailed:  # its DataNode does not answer yet
                pass
            if time.monotonic() > deadline:
                raise ResizeFailed(
                    f"{member.hostname}'s DataNode did not register with the NameNode within "
                    f"{settings.RESIZE_DRAIN_SECONDS} s of its restart"
                )
            time.sleep(settings.RESIZE_POLL_SECONDS)
    op.configure_again()
