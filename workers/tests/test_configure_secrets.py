"""A failed configure step's event quotes the product's last output, never the cluster's
password or secret."""

import pytest

from apps.catalog.services import load_catalog
from apps.clusters import container_specs, credentials
from apps.clusters.tests.test_connection import launched
from apps.nodes import NodeClient
from workers import lifecycle, node_steps, reconciler

pytestmark = pytest.mark.django_db


def test_a_failed_step_masks_the_password_and_the_secret(monkeypatch, alice):
    load_catalog()
    cluster = launched(alice, "spark", "4.3.0", state="configuring")
    made = credentials.ensure_credentials(cluster)
    master = cluster.instances.get(role="master")
    step = container_specs.ConfigureStep("Workers registered", 5, [(master, "c", ["true"])])
    monkeypatch.setattr(container_specs, "configure_steps", lambda _cluster: [step])
    said = f"login {made.username}/{made.password} refused; secret {made.secret}"
    monkeypatch.setattr(node_steps, "exec_run", lambda _run, _timeout: (1, said))

    with pytest.raises(lifecycle.StepFailed) as failed:
        lifecycle.configure(cluster)
    problem = str(failed.value)

    assert problem.startswith("Workers registered: master-0 exited with 1: login alice/")
    assert made.password not in problem and made.secret not in problem
    assert problem.count(credentials.MASK) == 2


def test_a_stopped_containers_last_log_lines_mask_them_too(monkeypatch, alice):
    load_catalog()
    cluster = launched(alice, "spark", "4.3.0", state="running")
    made = credentials.ensure_credentials(cluster)
    logged = f"starting with secret {made.secret}\nbad password {made.password}\n"

    class Node:  # the launched cluster's instances are not placed: any node will do
        name, endpoint, tls_dir = "lab-1", "unix:///nowhere", ""

    monkeypatch.setattr(NodeClient, "logs", lambda _client, _container, tail: logged)
    quoted = reconciler._last_lines(Node(), "abc", cluster.id)
    assert "starting with secret" in quoted and "bad password" in quoted
    assert made.password not in quoted and made.secret not in quoted
