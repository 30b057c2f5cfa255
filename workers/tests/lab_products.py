"""The real products on the real lab, launched as a user does (the launch service, a real
worker, the catalog's default shape within the demo user's quota), for each product's lab tests
(apps/products/*/tests/test_*_lab.py) and the portal's (jobs, proxy, logs, SSH): launch,
run a command in a member, resize, destroy and check that everything was given back. The images
are those `lab up` built from deploy/images/."""

import shlex
from pathlib import Path

from django.core.management import call_command

from apps import nodes
from apps.accounts.models import Quota
from apps.catalog.images import missing_images
from apps.catalog.models import ProductVersion
from apps.clusters import container_specs, credentials, services
from apps.clusters.connection import connection_details
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Address, Node
from apps.lab.management.commands.seed_demo import DEMO_QUOTA
from apps.nodes import engine

S = Cluster.State
READY_SECONDS = 300  # launch to running on 2 shared cores, health checks included
RESIZE_SECONDS = 600  # a grow runs the product's health checks again; a shrink decommissions


def launch_default(user, product: str, name: str) -> Cluster:
    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=user, defaults=DEMO_QUOTA)  # the demo user's limits
    version = (
        ProductVersion.objects.filter(product__name=product)
        .exclude(image__in=["mongo:7.0"])
        .order_by("-id")
        .first()
    )
    assert version is not None, f"no {product} version in the catalog"
    assert missing_images(version) == [], "lab up builds every product image"
    for node in Node.objects.filter(name__startswith="lab-"):
        assert version.image in node.images, f"lab up did not build {version.image} on {node}"
    cluster = services.launch(user, version, name, {})
    return wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)


def run(instance: Instance, *argv: str, timeout: float = 300) -> str:
    assert instance.node is not None, "placed on a node"
    code, output = nodes.client(instance.node).exec(instance.container_id, list(argv), timeout)
    assert code == 0, output[-2000:]
    return output


def destroy_and_check(cluster: Cluster) -> None:
    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, S.DESTROYED, seconds=120)
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()
    addresses = cluster.instances.values_list("address_id", flat=True)
    assert not Address.objects.filter(held=True, id__in=list(addresses)).exists()
    for node in {i.node for i in cluster.instances.select_related("node")}:
        assert node is not None, "placed on a node"
        left = engine.cached(node).containers.list(
            all=True, filters={"label": f"platter.cluster={cluster.id}"}
        )
        assert left == []


def instance(cluster: Cluster, role: str, index: int = 0) -> Instance:
    return cluster.instances.select_related("node").get(role=role, index=index, active=True)


def data_dirs(instance: Instance) -> list[Path]:
    """The instance's /data/N folders, as seen from the node (this machine, in the lab)."""
    folder = container_specs.data_folder(instance.cluster)
    return [
        Path(a.disk.mount_path) / folder
        for a in instance.allocations.filter(active=True).select_related("disk")
    ]


def assert_no_secret_shown(cluster: Cluster) -> None:
    """Neither the cluster's events nor its containers' logs quote its password or secret."""
    made = credentials.credentials_of(cluster)
    assert made is not None, "a launch makes the cluster's credentials"
    secrets = (made.password, made.secret)
    for message in cluster.events.values_list("message", flat=True):
        assert not any(s in message for s in secrets), f"an event quotes a secret: {message!r}"
    for member in cluster.instances.filter(active=True).select_related("node"):
        assert member.node is not None, "placed on a node"
        log = engine.cached(member.node).api.logs(member.container_id).decode(errors="replace")
        assert not any(s in log for s in secrets), f"{member.hostname}'s log quotes a secret"


def shown_string(cluster: Cluster, start: str) -> list[str]:
    """The argv of the connection string the cluster page shows its owner, starting so."""
    strings = connection_details(cluster, cluster.owner).strings
    return shlex.split(next(s.value for s in strings if s.value.startswith(start)))


def attempt(member: Instance, *argv: str, timeout: float = 120) -> tuple[int, str]:
    assert member.node is not None, "placed on a node"
    return nodes.client(member.node).exec(member.container_id, list(argv), timeout)


def mapped_archives(member: Instance) -> set[str]:
    """The class-data-sharing archives of the image (not the JDK's own) that the instance's
    JVMs have mapped: the fast start's archives, dumped when the image was built."""
    output = run(
        member,
        "sh",
        "-c",
        "cat /proc/[0-9]*/maps 2>/dev/null | grep -o '/opt/[^ ]*/cds/[^ ]*[.]jsa' | sort -u"
        " || true",
    )
    return {Path(line).name for line in output.split()}


def launched(user, product: str, name: str, **options) -> Cluster:
    from django.core.management import call_command

    from apps.accounts.models import Quota
    from apps.catalog.models import ProductVersion
    from apps.lab.management.commands.seed_demo import DEMO_QUOTA

    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=user, defaults=DEMO_QUOTA)
    version = ProductVersion.objects.filter(product__name=product).order_by("-id").first()
    assert version is not None
    cluster = services.launch(user, version, name, options)
    return wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)


def reshaped(
    cluster: Cluster,
    role: str,
    cores: int | None = None,
    memory_mb: int | None = None,
    seconds: float = RESIZE_SECONDS,
) -> Cluster:
    """The role's instances given new cores and/or memory (a vertical resize), running again
    with no failure among the events."""
    mark = cluster.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_vertical_resize(cluster.id, role, cores, memory_mb) == S.RESIZING
    done = wait_for(cluster.id, S.RUNNING, seconds=seconds)
    failed = done.events.filter(id__gt=mark, message__startswith="resize failed")
    assert not failed.exists(), [e.message for e in failed]
    return done


def resized(
    cluster: Cluster, workers: int, role: str = "worker", seconds: float = RESIZE_SECONDS
) -> Cluster:
    mark = cluster.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_resize(cluster.id, workers) == S.RESIZING
    done = wait_for(cluster.id, S.RUNNING, seconds=seconds)
    failed = done.events.filter(id__gt=mark, message__startswith="resize failed")
    assert not failed.exists(), [e.message for e in failed]
    assert done.instances.filter(role=role, active=True).count() == workers
    return done
