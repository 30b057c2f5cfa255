"""Node steps that more than one operation takes: a launch and a start (workers/lifecycle.py)
and a resize (workers/resize.py) prepare nodes, wipe data handed over from another cluster,
run commands in containers and give a perimeter back the same way.

Below both, importing neither: the operations runner (workers/operations.py) imports them, and
the lock a wipe helper names is portal.locks', not the runner's."""

from apps import nodes
from apps.clusters.models import Cluster, DiskAllocation
from apps.inventory.models import Network, Node
from apps.nodes import NodeError, helpers
from apps.products import base as plugin_base
from portal import locks

from . import perimeter

# A step cannot finish; the message is the reason a user reads (the plugins catch it too).
StepFailed = plugin_base.StepFailed


def named(error: Exception, what: str) -> Exception:
    """The error with what was being done in front; node errors keep their type (a transient
    one is retried by the runner)."""
    if isinstance(error, NodeError):
        return type(error)(error.node, f"{what}: {error.message}", error.transient)
    return StepFailed(f"{what}: {error}")


def exec_run(run: tuple, timeout: int) -> tuple[int, str]:
    """One run of a configure step ((instance, container name, argv)): (exit code, output)."""
    instance, name, argv = run
    return nodes.client(instance.node).exec(name, argv, timeout)


def kept_by_others(cluster: Cluster) -> dict[int, list[DiskAllocation]]:
    """Per node, the disks this cluster now holds that still keep another cluster's data:
    that data is wiped before the disks are handed over (a user whose data was kept chose a
    destroy that keeps it, and gave the disks up when they were given to someone else)."""
    mine = cluster.instances.filter(active=True)
    disk_ids = DiskAllocation.objects.filter(instance__in=mine, active=True).values("disk_id")
    stale = (
        DiskAllocation.objects.filter(disk_id__in=disk_ids, active=False, handed_over=True)
        .exclude(instance__cluster=cluster)
        .select_related("disk")
    )
    per_node: dict[int, list[DiskAllocation]] = {}
    for allocation in stale:
        per_node.setdefault(allocation.disk.node_id, []).append(allocation)
    return per_node


def forget_kept(handed_over: dict[int, list[DiskAllocation]]) -> None:
    """The handed-over disks (kept_by_others) were wiped: nobody's data waits on them."""
    ids = [a.id for allocations in handed_over.values() for a in allocations]
    DiskAllocation.objects.filter(id__in=ids).update(handed_over=False)


def prepare_node(
    node: Node,
    images: set[str],
    networks: set[Network],
    stale: list[DiskAllocation],
    own_folder: str,
    labels: dict[str, str],
) -> None:
    """The cluster's network (its segment) and its images exist on the node, and disks handed
    over from another cluster hold no data but this cluster's own. Runs in a node thread:
    everything it needs from the database is read before."""
    client = nodes.client(node)
    for network in networks:
        client.ensure_network(
            network.docker_name, network.subnet, network.gateway, network.parent_on(node)
        )
    for image in sorted(images):
        client.ensure_image(image)
    if stale:
        site, keep = own_folder.split("/", 1)
        disks = sorted({a.disk.mount_path for a in stale})
        binds = [f"{path}/{site}:/wipe/{n}:rw" for n, path in enumerate(disks, start=1)]
        # Every other cluster's folder goes; this cluster's own (a reuse) stays.
        command = [
            "sh",
            "-c",
            f'for d in /wipe/*/*; do [ "${{d##*/}}" = "{keep}" ] || rm -rf "$d"; done',
        ]
        code, output = client.run_helper(command, binds, ("DAC_OVERRIDE", "FOWNER"), labels=labels)
        if code != 0:
            raise NodeError(node.name, f"wiping handed-over disks failed: {output[-300:]}")


def wipe_labels(cluster_id: int) -> dict[str, str]:
    """A wipe helper's labels: it serves the operation holding the cluster's lock (the
    reconciler leaves it alone until that operation ends, however long the wipe takes)."""
    return helpers.serving("wipe", locks.CLUSTER, cluster_id, cluster=cluster_id)


def unguard(targets: list[Node]) -> None:
    """The perimeter's rules of nodes a cluster (or some of its instances) left: a node that
    does not answer now gets them from the reconciler's next refresh."""
    perimeter.apply(targets)
