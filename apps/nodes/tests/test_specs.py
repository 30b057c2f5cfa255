"""The node boundary faked: error classification and the container spec, without a daemon."""

import docker
import pytest
import requests
from docker.errors import APIError, NotFound

from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.container_specs import UntrustedVersion, plans_for
from apps.clusters.models import Cluster
from apps.nodes import (
    NodeClient,
    NodeConflict,
    NodeError,
    NodeMissing,
    NodeRefused,
    NodeUnreachable,
)
from apps.nodes.engine import classify
from apps.nodes.specs import ContainerSpec


def test_unreachable_nodes_and_server_errors_are_transient_client_errors_are_not():
    assert isinstance(classify("n1", requests.ConnectionError("refused")), NodeUnreachable)
    assert classify("n1", requests.ReadTimeout("slow")).transient
    response = requests.Response()
    response.status_code = 500
    assert classify("n1", APIError("boom", response, "daemon broke")).transient
    response = requests.Response()
    response.status_code = 400
    refused = classify("n1", APIError("bad", response, "invalid mount config"))
    assert not refused.transient and isinstance(refused, NodeRefused)
    assert str(refused) == "node n1: invalid mount config"
    response.status_code = 409
    assert isinstance(classify("n1", APIError("taken", response, "name in use")), NodeConflict)
    response.status_code = 404
    assert isinstance(classify("n1", NotFound("gone", response, "no such container")), NodeMissing)
    with pytest.raises(ZeroDivisionError):
        classify("n1", ZeroDivisionError())  # our bugs are not node errors
    assert isinstance(classify("n1", NodeError("n1", "x", False)), NodeError)


# Host config that would share the host's namespaces, devices or ports, or mount more than the
# binds: a container gets none of it.
HOST_ACCESS_KEYS = (
    "PidMode",
    "IpcMode",
    "UTSMode",
    "UsernsMode",
    "CgroupnsMode",
    "Devices",
    "DeviceRequests",
    "PortBindings",
    "Mounts",
    "VolumesFrom",
    "Sysctls",
)


def plan(**changes) -> ContainerSpec:
    values = dict(
        instance_id=7,
        node=None,
        name="site-c3-worker-0",
        image="img:1",
        hostname="worker-0",
        address="10.0.0.5",
        network="platter-seg-3",
        command=["run"],
        environment={"A": "1"},
        labels={"platter.site": "site", "platter.instance": "7"},
        cores=2,
        memory_mb=512,
        binds=["/disks/d1/site/cluster-3:/data/1:rw"],
        capabilities=["CHOWN"],
        extra_hosts={"worker-0": "10.0.0.5", "master-0": "10.0.0.4"},
    )
    return ContainerSpec(**{**values, **changes})


def test_a_container_gets_its_limits_disks_address_and_nothing_more(settings):
    api = docker.APIClient(base_url="tcp://127.0.0.1:9", version="1.41")  # never contacted
    settings.CONTAINER_ROOTFS_LIMIT = ""
    arguments = NodeClient._create_arguments(api, plan())
    config = arguments["host_config"]
    assert config["PidsLimit"] == settings.CONTAINER_PIDS_LIMIT
    assert not config.get("StorageOpt")
    assert config["NanoCpus"] == 2 * 10**9
    assert config["Memory"] == config["MemorySwap"] == 512 * 2**20
    assert config["Binds"] == ["/disks/d1/site/cluster-3:/data/1:rw"]
    assert config["CapDrop"] == ["ALL"] and config["CapAdd"] == ["CHOWN"]
    assert config["SecurityOpt"] == ["no-new-privileges"]
    assert not config.get("Privileged")
    assert config["NetworkMode"] == "platter-seg-3"  # the cluster's segment
    for key in HOST_ACCESS_KEYS:
        assert not config.get(key), key
    assert sorted(config["ExtraHosts"]) == ["master-0:10.0.0.4", "worker-0:10.0.0.5"]
    endpoint = arguments["networking_config"]["EndpointsConfig"]["platter-seg-3"]
    assert endpoint["IPAMConfig"]["IPv4Address"] == "10.0.0.5"
    assert arguments["labels"]["platter.fingerprint"] == plan().fingerprint()


def test_the_writable_layer_limit_comes_from_settings(settings):
    settings.CONTAINER_ROOTFS_LIMIT = "2G"
    api = docker.APIClient(base_url="tcp://127.0.0.1:9", version="1.41")  # never contacted
    assert NodeClient._create_arguments(api, plan())["host_config"]["StorageOpt"] == {"size": "2G"}


def test_a_new_address_or_disk_changes_the_fingerprint_so_old_containers_are_replaced():
    assert plan().fingerprint() == plan().fingerprint()
    assert plan(address="10.0.0.6").fingerprint() != plan().fingerprint()
    assert plan(binds=["/disks/d2/x:/data/1:rw"]).fingerprint() != plan().fingerprint()


@pytest.mark.django_db
def test_it_refuses_to_plan_a_version_that_lost_its_trust(alice):
    load_catalog()
    version = ProductVersion.objects.get(product__name="demo")
    version.capabilities = ["CHOWN", "NET_ADMIN"]
    version.trusted = True
    version.save()
    cluster = Cluster.objects.create(owner=alice, version=version, name="c")
    assert plans_for(cluster) == []  # no instances yet, but allowed
    version.trusted = False
    version.save()
    cluster.refresh_from_db()
    with pytest.raises(UntrustedVersion, match=r"demo 1.0 asks for .*\(NET_ADMIN\)"):
        plans_for(cluster)
