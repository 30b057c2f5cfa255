"""Container logs on the real lab: a cluster launched by the real worker, its containers' log
lines read through the API (tail, since, a follow that ends by itself) and the web's logs
panel, on every node transport (tcp:// with TLS and ssh://); then a real product's log."""

import os
import threading
import time

import pytest
import requests
from django.conf import settings
from django.urls import reverse

from apps import nodes
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters import services
from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.waiting import wait_for
from apps.lab import devservers
from apps.lab.tests.test_devservers import free_port
from conftest import _database_url

from .conftest import token_for

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State
HTMX = {"HTTP_HX_REQUEST": "true"}


def say(instance: Instance, text: str) -> None:
    """A line in the container's log, written to its main process's stdout."""
    assert instance.node is not None, "placed on a node"
    code, output = nodes.client(instance.node).exec(
        instance.container_id, ["sh", "-c", f"echo {text} >/proc/1/fd/1"], 30
    )
    assert code == 0, output


def user_session(user) -> requests.Session:
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {token_for(user)}"
    return http


def follow(http: requests.Session, url: str, **params) -> tuple[list[str], threading.Thread]:
    """Lines of a follow answer as they arrive, read in a thread (the list grows)."""
    lines: list[str] = []

    def read() -> None:
        query = {"follow": "true", **params}
        with http.get(url, params=query, stream=True, timeout=60) as response:
            assert response.status_code == 200, response.text
            pending = ""  # read1: what has come so far (iter_lines waits for 512 bytes)
            while chunk := response.raw.read1(4096):
                *complete, pending = (pending + chunk.decode()).split("\n")
                lines.extend(complete)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, reader


def until(predicate, seconds: float = 20, *, what: object = None) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out; have {what!r}"
        time.sleep(0.1)


@pytest.fixture
def web_server(django_db_setup, tmp_path):
    """The web server as `./platter run` starts it (ASGI: a follow streams only there; a WSGI
    server such as live_server's reads an async body to its end first), on the test database."""
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(settings.DATABASES["default"]),
        "GUNICORN_WORKERS": "2",
    }
    with (tmp_path / "web.log").open("w") as log:
        server = devservers.start_web(address, env, log)
        try:
            devservers.wait_for_web(address, server)
            yield f"http://{address}"
        finally:
            devservers.stop_process(server)


def test_demo_logs_through_the_api_and_the_web_on_every_node(
    dispatching, lab_cleanup, web_server, alice, bob, client
):
    load_catalog()
    version = ProductVersion.objects.get(product__name="demo", version="1.0")
    cluster = services.launch(alice, version, "logs", {"size": 3})  # 4 instances, 4 nodes
    wait_for(cluster.id, S.RUNNING)
    instances = list(cluster.instances.select_related("node").filter(active=True))
    assert {i.node.endpoint.split(":")[0] for i in instances} == {"tcp", "ssh"}
    http, url = user_session(alice), f"{web_server}/api/v1/clusters/{cluster.id}/logs"

    for instance in instances:
        say(instance, f"first-line-of-{instance.hostname}")
        say(instance, f"second-line-of-{instance.hostname}")
    for instance in instances:
        query = {"instance": instance.hostname, "tail": 2}
        answer = http.get(url, params=query, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert answer.text.splitlines()[-2:] == [
            f"first-line-of-{instance.hostname}",
            f"second-line-of-{instance.hostname}",
        ]
        stamped = http.get(url, params={**query, "timestamps": "true"}, timeout=30).text
        last = stamped.splitlines()[-1].split(" ")[0]
        after = http.get(url, params={**query, "since": last}, timeout=30)
        assert after.status_code == 200 and after.text == ""  # nothing after the last line

    # A follow on a tcp:// node and one on the ssh:// node: a new line arrives while the
    # answer is open, and the answer ends by itself after `seconds`.
    for transport in ("tcp", "ssh"):
        instance = next(i for i in instances if i.node.endpoint.startswith(transport))
        started = time.monotonic()
        lines, reader = follow(http, url, instance=instance.hostname, tail=1, seconds=6)
        until(lambda: lines == [f"second-line-of-{instance.hostname}"], what=lines)  # noqa: B023
        say(instance, f"followed-on-{transport}")
        until(lambda: f"followed-on-{transport}" in lines, what=lines)  # noqa: B023
        reader.join(timeout=30)
        assert not reader.is_alive()
        assert time.monotonic() - started < 6 + 10, "the follow did not end by itself"

    # The web's logs panel: the last lines, then a follow poll with only the new line.
    master = next(i for i in instances if i.hostname == "master-0")
    client.force_login(alice)
    panel_url = reverse("web:cluster-logs", args=[cluster.id])
    shown = client.get(panel_url, {"instance": "master-0", "tail": "3", "follow": "1"}, **HTMX)
    html = shown.content.decode()
    assert "second-line-of-master-0" in html and 'hx-trigger="every 2s"' in html
    poll = html.split('<div id="log-follow" hx-get="')[1].split('"')[0].replace("&amp;", "&")
    say(master, "seen-by-the-web")
    more = client.get(poll, **HTMX).content.decode()
    assert '<div hx-swap-oob="beforeend:#log-lines">seen-by-the-web\n</div>' in more

    assert user_session(bob).get(url, timeout=30).status_code == 404
    client.force_login(bob)
    assert client.get(panel_url, {"instance": "master-0"}, **HTMX).status_code == 404

    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, S.DESTROYED, seconds=120)
    gone = http.get(url, params={"instance": "master-0"}, timeout=30)
    assert gone.status_code == 409
    assert gone.json()["message"] == (
        "The container of master-0 no longer exists: the cluster is destroyed."
    )


def test_the_spark_master_log_shows_its_workers_registering(
    dispatching, lab_cleanup, live_server, alice
):
    from workers.tests.lab_products import READY_SECONDS, launch_default

    cluster = launch_default(alice, "spark", "spark-logs")
    http = user_session(alice)
    url = f"{live_server.url}/api/v1/clusters/{cluster.id}/logs"
    workers = cluster.instances.filter(role="worker").count()
    deadline = time.monotonic() + READY_SECONDS
    while True:
        text = http.get(url, params={"instance": "master-0", "tail": 2000}, timeout=30).text
        if text.count("Registering worker") >= workers:
            break
        assert time.monotonic() < deadline, f"no worker registered in the master's log:\n{text}"
        time.sleep(1)
    assert "Starting Spark master" in text or "Master" in text
    worker_log = http.get(url, params={"instance": "worker-0", "tail": 2000}, timeout=30).text
    assert "Successfully registered with master" in worker_log
    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, S.DESTROYED, seconds=120)
