"""The raw path of bench/time_to_ready (the demo's and the products'): Platter's own container
plans started with plain Docker calls on the nodes Platter chose, with names, addresses and
data folders of their own, and removed again whatever happens."""

import contextlib
import ipaddress
import shutil

from django.conf import settings

# Every raw container carries this label, so a round's leftovers are found and removed.
RAW_LABEL = "platter.bench-raw"


def raw_addresses(network, count: int, taken: set[str]) -> list[str]:
    """`count` addresses of the plan's own segment for the raw copies: from the top of the
    range the portal hands out, downwards, skipping Platter's own (its containers may still be
    going, and a fresh address also gets a fresh MAC)."""
    first = int(ipaddress.ip_address(network.first_address))
    candidate = int(ipaddress.ip_address(network.last_address))
    found: list[str] = []
    while len(found) < count and candidate >= first:
        address = str(ipaddress.ip_address(candidate))
        if address not in taken:
            found.append(address)
        candidate -= 1
    if len(found) < count:
        raise SystemExit(f"{network} has no {count} addresses to spare for the raw path")
    return found


def segment_of(docker_name: str):
    """The inventory's network behind a plan's Docker network (the cluster's segment)."""
    from apps.inventory.models import Network

    for network in Network.objects.all():
        if network.docker_name == docker_name:
            return network
    raise SystemExit(f"no network of the inventory is {docker_name} on the nodes")


def raw_plans(plans, round_no: int, kind: str = "raw", environment=None) -> list:
    """Platter's container plans with names, addresses (on the plan's own segment: the Docker
    network only takes its own subnet's), data folders and /etc/hosts entries of their own,
    in plan order. `kind` names the copies (raw, stock); `environment` is added to theirs."""
    from apps.nodes.specs import ContainerSpec

    networks = {plan.network for plan in plans}
    if len(networks) != 1:
        raise SystemExit(f"the plans span {len(networks)} networks, not one: {sorted(networks)}")
    addresses = raw_addresses(
        segment_of(networks.pop()), len(plans), {plan.address for plan in plans}
    )
    copies = []
    for n, plan in enumerate(plans):
        copy = ContainerSpec(**{**plan.__dict__})
        copy.name = f"{settings.PLATTER_SITE}-{kind}-{round_no}-{n}"
        copy.address = addresses[n]
        copy.environment = {**plan.environment, **(environment or {})}
        copy.binds = [b.replace("/cluster-", f"/{kind}-{round_no}-") for b in plan.binds]
        copy.labels = {**plan.labels, RAW_LABEL: str(round_no)}
        copies.append(copy)
    hosts = {c.hostname: c.address for c in copies}
    for copy in copies:
        copy.extra_hosts = hosts
    return copies


def start_plan(plan) -> None:
    """Create and start one planned container straight through the SDK."""
    from apps.nodes import NodeClient, engine

    api = engine.cached(plan.node).api
    api.start(api.create_container(**NodeClient._create_arguments(api, plan))["Id"])


def remove_raw(copies) -> None:
    """The raw round's containers and data folders, whichever of them were made."""
    from docker.errors import NotFound

    from apps.nodes import engine

    for copy in copies:
        with contextlib.suppress(NotFound):  # the round failed before making this one
            engine.cached(copy.node).api.remove_container(copy.name, force=True)
        for bind in copy.binds:
            shutil.rmtree(bind.split(":")[0], ignore_errors=True)


def remove_leftovers(nodes) -> int:
    """Raw containers an interrupted earlier run of this site left on the nodes (they would
    hold the names and addresses of this run's); how many there were."""
    from apps.nodes import engine

    found = 0
    labels = [RAW_LABEL, f"platter.site={settings.PLATTER_SITE}"]  # not another site's run
    for node in nodes:
        api = engine.cached(node).api
        for container in api.containers(all=True, filters={"label": labels}):
            api.remove_container(container["Id"], force=True)
            found += 1
    return found
