"""A failed configure step's event quotes the product's last output, never the cluster's
password or secret."""

import pytest

from apps.catalog.services import load_catalog
from apps.clusters import credentials
from apps.clusters.tests.test_connection import launched
from workers import containers, lifecycle, reconciler

pytestmark = pytest.mark.django_db


def test_a_failed_step_masks_the_password_and_the_secret(monkeypatch, alice):
    load_catalog()
    cluster = launched(alice, "spark", "4.3.0", state="configuring")
    made = credentials.ensure_credentials(cluster)
    master = cluster.instances.get(role="master")
    step = containers.ConfigureStep("Workers registered", 5, [(master, "c", ["true"])])
    monkeypatch.setattr(containers, "configure_steps", lambda _cluster: [step])
    said = f"login {made.username}/{made.password} refused; secret {made.secret}"
    monkeypatch.setattr(lifecycle, "_exec", lambda _run, _timeout: (1, said))

    problem = lifecycle._configure(cluster)

    assert problem.startswith("Workers registered: master-0 exited with 1: login alice/")
    assert made.password not in problem and made.secret not in problem
    assert problem.count(credentials.MASK) == 2


def test_a_stopped_containers_last_log_lines_mask_them_too(monkeypatch, alice):
    load_catalog()
    cluster = launched(alice, "spark", "4.3.0", state="running")
    made = credentials.ensure_credentials(cluster)
    master = cluster.instances.select_related("node").get(role="master")
    logged = f"starting with secret {made.secret}\nbad password {made.password}\n".encode()

    class FakeApi:
        def logs(self, container_id, tail):
            return logged

    class FakeClient:
        api = FakeApi()

    monkeypatch.setattr(reconciler.drivers, "client_for", lambda _node: FakeClient())
    quoted = reconciler._last_lines(master.node, "abc", cluster.id)
    assert "starting with secret" in quoted and "bad password" in quoted
    assert made.password not in quoted and made.secret not in quoted
