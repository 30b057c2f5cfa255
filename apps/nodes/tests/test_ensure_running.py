"""NodeClient.ensure_running against a stand-in Engine API: a launch's container costs a
create and a start, as a plain `docker run` (issue 34); only a name already taken costs a look
at the container holding it, which is reused when it is the same spec and replaced when not."""

import pytest
import requests
from docker.errors import APIError, NotFound

from apps.nodes.client import NodeClient
from apps.nodes.engine import Address
from apps.nodes.specs import ContainerSpec

NODE = Address("lab-1", "unix:///nowhere")


def response(status_code: int) -> requests.Response:
    answer = requests.Response()
    answer.status_code = status_code
    return answer


class Engine:
    """The few Engine API calls ensure_running makes, over a dict of containers by name."""

    def __init__(self) -> None:
        self.containers: dict[str, dict] = {}
        self.calls: list[str] = []

    def create_container(self, name: str, labels: dict) -> dict:
        self.calls.append("create")
        if name in self.containers:
            raise APIError("Conflict", response(409), "name in use")
        made = {"Id": f"id-{len(self.calls)}", "Labels": labels, "Running": False}
        self.containers[name] = made
        return {"Id": made["Id"]}

    def inspect_container(self, name: str) -> dict:
        self.calls.append("inspect")
        if name not in self.containers:
            raise NotFound("No such container", response(404))
        found = self.containers[name]
        return {
            "Id": found["Id"],
            "State": {"Running": found["Running"]},
            "Config": {"Labels": found["Labels"]},
        }

    def start(self, container_id: str) -> None:
        self.calls.append("start")
        for found in self.containers.values():
            if found["Id"] == container_id:
                found["Running"] = True

    def remove_container(self, name: str, force: bool) -> None:
        self.calls.append("remove")
        self.containers.pop(name, None)


@pytest.fixture
def engine(monkeypatch):
    api = Engine()
    monkeypatch.setattr(NodeClient, "_api", property(lambda self: api))
    monkeypatch.setattr(
        NodeClient,
        "_create_arguments",
        staticmethod(
            lambda _api, spec: {
                "name": spec.name,
                "labels": {**spec.labels, "platter.fingerprint": spec.fingerprint()},
            }
        ),
    )
    return api


def spec(address: str = "10.0.0.2") -> ContainerSpec:
    return ContainerSpec(
        instance_id=1,
        node=NODE,
        name="cluster-1-worker-0",
        image="platter/demo:1",
        hostname="c-worker-0",
        address=address,
        network="seg-1",
        command=None,
        environment={},
        labels={},
        cores=1,
        memory_mb=256,
        binds=[],
        capabilities=[],
        extra_hosts={},
    )


def test_a_new_container_is_created_and_started_without_looking_first(engine):
    container_id, _ = NodeClient(NODE).ensure_running(spec())
    assert engine.calls == ["create", "start"]
    assert engine.containers["cluster-1-worker-0"] == {
        "Id": container_id,
        "Labels": {"platter.fingerprint": spec().fingerprint()},
        "Running": True,
    }


def test_a_retried_launch_reuses_the_same_container(engine):
    client = NodeClient(NODE)
    first, _ = client.ensure_running(spec())
    engine.calls.clear()
    assert client.ensure_running(spec())[0] == first
    assert engine.calls == ["create", "inspect"]  # running already: nothing else to do


def test_a_created_but_not_started_container_is_started(engine):
    client = NodeClient(NODE)
    engine.create_container("cluster-1-worker-0", {"platter.fingerprint": spec().fingerprint()})
    engine.calls.clear()
    client.ensure_running(spec())
    assert engine.calls == ["create", "inspect", "start"]
    assert engine.containers["cluster-1-worker-0"]["Running"]


def test_a_container_of_an_older_spec_is_replaced(engine):
    client = NodeClient(NODE)
    old, _ = client.ensure_running(spec(address="10.0.0.9"))
    engine.calls.clear()
    new, _ = client.ensure_running(spec())
    assert new != old
    assert engine.calls == ["create", "inspect", "remove", "create", "start"]
