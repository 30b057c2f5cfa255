"""The node boundary faked: error classification and the container spec, without a daemon."""

import docker
import pytest
import requests
from docker.errors import APIError

from workers.containers import ContainerPlan, create_arguments
from workers.drivers import NodeError, classify


def test_unreachable_nodes_and_server_errors_are_transient_client_errors_are_not():
    assert classify("n1", requests.ConnectionError("refused")).transient
    assert classify("n1", requests.ReadTimeout("slow")).transient
    response = requests.Response()
    response.status_code = 500
    assert classify("n1", APIError("boom", response, "daemon broke")).transient
    response = requests.Response()
    response.status_code = 400
    refused = classify("n1", APIError("bad", response, "invalid mount config"))
    assert not refused.transient
    assert str(refused) == "node n1: invalid mount config"
    with pytest.raises(ZeroDivisionError):
        classify("n1", ZeroDivisionError())  # our bugs are not node errors
    assert isinstance(classify("n1", NodeError("n1", "x", False)), NodeError)


def plan(**changes) -> ContainerPlan:
    values = dict(
        instance_id=7, node=None, name="site-c3-worker-0", image="img:1", hostname="worker-0",
        address="10.0.0.5", command=["run"], environment={"A": "1"},
        labels={"platter.site": "site", "platter.instance": "7"}, cores=2, memory_mb=512,
        binds=["/disks/d1/site/cluster-3:/data/1:rw"], capabilities=["NET_RAW"],
        extra_hosts={"worker-0": "10.0.0.5", "master-0": "10.0.0.4"},
    )  # fmt: skip
    return ContainerPlan(**{**values, **changes})


def test_a_container_gets_its_limits_disks_address_and_nothing_more(settings):
    api = docker.APIClient(base_url="tcp://127.0.0.1:9", version="1.41")  # never contacted
    arguments = create_arguments(api, plan())
    config = arguments["host_config"]
    assert config["NanoCpus"] == 2 * 10**9
    assert config["Memory"] == config["MemorySwap"] == 512 * 2**20
    assert config["Binds"] == ["/disks/d1/site/cluster-3:/data/1:rw"]
    assert config["CapDrop"] == ["ALL"] and config["CapAdd"] == ["NET_RAW"]
    assert config["SecurityOpt"] == ["no-new-privileges"]
    assert not config.get("Privileged")
    assert config["NetworkMode"] == settings.NODE_NETWORK_NAME
    assert sorted(config["ExtraHosts"]) == ["master-0:10.0.0.4", "worker-0:10.0.0.5"]
    endpoint = arguments["networking_config"]["EndpointsConfig"][settings.NODE_NETWORK_NAME]
    assert endpoint["IPAMConfig"]["IPv4Address"] == "10.0.0.5"
    assert arguments["labels"]["platter.fingerprint"] == plan().fingerprint()


def test_a_new_address_or_disk_changes_the_fingerprint_so_old_containers_are_replaced():
    assert plan().fingerprint() == plan().fingerprint()
    assert plan(address="10.0.0.6").fingerprint() != plan().fingerprint()
    assert plan(binds=["/disks/d2/x:/data/1:rw"]).fingerprint() != plan().fingerprint()
