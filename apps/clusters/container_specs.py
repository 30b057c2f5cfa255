"""What an instance's container looks like (a ContainerSpec for the node layer), derived from
the database.

Names and labels come from the portal's ids, so a retried task finds what an earlier try made
and the reconciler can tell our containers (and whose) from anything else on a node. A
container gets its reserved cores and memory, its own disks at /data/1..N (a per-cluster folder
on each disk), its portal-assigned address on the cluster network, every member in /etc/hosts,
and nothing more: no host paths besides its disks, no privileges, only the capabilities the
product declares.
"""

from dataclasses import dataclass

from django.conf import settings

from apps.catalog import templating
from apps.catalog.images import site_image
from apps.catalog.services import needs_trust
from apps.catalog.spec import definition_of
from apps.clusters import access
from apps.clusters.data_path import cluster_spec
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.inventory.models import Address, Disk, Node
from apps.nodes.specs import ContainerSpec, throttle_options


class UntrustedVersion(ValueError):
    """The cluster's version asks for capabilities no admin has trusted."""


def container_name(cluster_id: int, role: str, index: int) -> str:
    return f"{settings.PLATTER_SITE}-c{cluster_id}-{role}-{index}"


def site_labels() -> dict[str, str]:
    return {"platter.site": settings.PLATTER_SITE}


def data_folder(cluster: Cluster) -> str:
    """The folder name on each disk: that of the cluster whose data this is, so a cluster that
    reuses another's data mounts the very same folders."""
    origin = cluster
    seen = {origin.id}
    while origin.reuse_data_of_id and origin.reuse_data_of_id not in seen:
        origin = Cluster.objects.get(id=origin.reuse_data_of_id)
        seen.add(origin.id)
    return f"{settings.PLATTER_SITE}/cluster-{origin.id}"


def disks_of(instances: list[Instance]) -> dict[int, list[Disk]]:
    """Each instance's active disks in /data/N order."""
    held: dict[int, list[Disk]] = {i.id: [] for i in instances}
    allocations = (
        DiskAllocation.objects.filter(instance__in=instances, active=True)
        .select_related("disk")
        .order_by("disk__mount_path", "disk_id")
    )
    for allocation in allocations:
        held[allocation.instance_id].append(allocation.disk)
    return held


def _placed(instance: Instance) -> tuple[Node, Address]:
    """The node and address an active instance holds (its reservation gave it both)."""
    if instance.node is None or instance.address is None:
        raise ValueError(f"{instance.hostname} has no node or address: it was never reserved")
    return instance.node, instance.address


def _active_instances(cluster: Cluster) -> list[Instance]:
    active = cluster.instances.filter(active=True)
    return list(active.select_related("node", "address__network").order_by("id"))


@dataclass
class ConfigureStep:
    description: str
    timeout: int
    runs: list[tuple[Instance, str, list[str]]]  # (instance, container name, argv)


def configure_steps(cluster: Cluster) -> list[ConfigureStep]:
    """The product's post-start steps, rendered for this cluster's instances."""
    instances = _active_instances(cluster)
    spec, hostnames = cluster_spec(cluster, instances)
    by_key = {(i.role, i.index): i for i in instances}
    steps = []
    for step in templating.configure_plan(cluster.definition, spec, cluster.name, hostnames):
        runs = []
        for instance_spec, argv in step["runs"]:
            instance = by_key[(instance_spec.role, instance_spec.index)]
            name = container_name(cluster.id, instance.role, instance.index)
            runs.append((instance, name, argv))
        steps.append(ConfigureStep(step["description"], int(step["timeout"]), runs))
    return steps


def plans_for(cluster: Cluster) -> list[ContainerSpec]:
    """The container of every active instance of the cluster, as its revision defines it
    (an admin's edit of the version since the launch changes nothing here)."""
    version = cluster.definition
    # The catalog offers only launchable versions; this holds for clusters queued before an
    # admin took the trust back, and for starts of stopped ones, right before Docker.
    beyond = needs_trust(version)
    if beyond and not version.trusted:
        raise UntrustedVersion(
            f"{version} asks for capabilities beyond Docker's defaults ({', '.join(beyond)}); "
            "an admin must mark it trusted before it runs"
        )
    instances = _active_instances(cluster)
    spec, hostnames = cluster_spec(cluster, instances)
    members = {i.hostname: _placed(i)[1].ip for i in instances}
    held = disks_of(instances)
    folder = data_folder(cluster)
    roles = {r["name"]: r for r in version.roles}
    plans = []
    for instance, instance_spec in zip(instances, spec.instances, strict=True):
        disks = held[instance.id]
        node, address = _placed(instance)
        plans.append(
            ContainerSpec(
                instance_id=instance.id,
                node=node,
                name=container_name(cluster.id, instance.role, instance.index),
                image=site_image(instance.image or version.image),
                hostname=instance.hostname,
                address=address.ip,
                network=address.network.docker_name,
                command=templating.instance_command(
                    version, spec, instance_spec, cluster.name, hostnames
                ),
                environment={
                    **templating.instance_environment(
                        version, spec, instance_spec, cluster.name, hostnames
                    ),
                    **access.instance_environment(cluster, instance),
                },
                labels={
                    **site_labels(),
                    "platter.cluster": str(cluster.id),
                    "platter.instance": str(instance.id),
                    "platter.role": instance.role,
                    "platter.index": str(instance.index),
                },
                cores=instance.cores,
                memory_mb=instance.memory_mb,
                binds=[
                    f"{disk.mount_path}/{folder}:{path}:rw"
                    for disk, path in zip(
                        disks,
                        definition_of(version).disk_destinations(instance.role, len(disks)),
                        strict=True,
                    )
                ],
                capabilities=list(version.capabilities or []),
                extra_hosts=members,
                user=roles.get(instance.role, {}).get("user", ""),
                throttles=throttle_options(disks),
            )
        )
    return plans
