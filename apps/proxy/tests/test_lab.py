"""Real products' web UIs through the portal, on the real lab: Spark's master UI in a real
browser (its workers listed, a worker's page reached by following a link), and the NameNode's
and ResourceManager's pages with the owner's session. The portal reaches the containers
through the lab's host shims, as a site's portal reaches its cluster networks."""

import re
import subprocess
import time

import pytest
from django.test import Client

from apps.clusters import access
from apps.clusters.models import Cluster, Instance
from apps.nodes import engine
from apps.proxy.tests.upstream import open_ui
from apps.web.tests.browsing import sign_in
from workers.tests.lab_products import instance, launch_default

pytestmark = pytest.mark.django_db(transaction=True)


def assert_host_reaches(address: str) -> None:
    """The host's route to a cluster address is a lab shim, never the default gateway."""
    route = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True)
    assert " via " not in route.stdout, f"no lab shim routes {address}: {route.stdout}"


PROBE = """
import time
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("ui-probe").getOrCreate()
spark.range(1000).count()
time.sleep(120)
spark.stop()
"""


def start_application(master: Instance) -> None:
    """A PySpark application on the master that holds its UI open for two minutes."""
    script = f"cat >/tmp/ui-probe.py <<'EOF'\n{PROBE}\nEOF\n"
    script += "spark-submit --executor-memory 512m /tmp/ui-probe.py >/tmp/ui-probe.log 2>&1"
    assert master.node is not None, "placed on a node"
    api = engine.cached(master.node).api
    started = api.exec_create(master.container_id, ["sh", "-c", script])
    api.exec_start(started["Id"], detach=True)


def ui_path(cluster: Cluster, port: int) -> str:
    for ui in access.web_uis(cluster):
        if ui["port"] == port:
            return ui["url"]
    raise AssertionError(f"no UI on port {port}: {access.web_uis(cluster)}")


@pytest.fixture
def context(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1200, "height": 900})
    context.set_default_timeout(20_000)
    yield context
    context.close()


def test_the_owner_sees_the_spark_master_and_its_workers_through_the_portal(
    dispatching, lab_cleanup, alice, bob, browser, live_server, context
):
    cluster = launch_default(alice, "spark", "ui-spark")
    master = instance(cluster, "master")
    assert_host_reaches(master.address.ip)
    workers = cluster.instances.filter(role="worker", active=True).count()
    url = ui_path(cluster, 8080)
    assert url == f"/clusters/{cluster.id}/ui/{master.hostname}/8080/"

    page = context.new_page()
    refused = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security" in m.text else None)
    sign_in(page, "alice", "alice-pass-123")
    answer = page.goto(url)  # the portal's path: on to the cluster's own origin with a ticket
    assert answer.status == 200
    ui_origin = live_server.url.replace("://localhost", f"://c{cluster.id}.ui.localhost")
    assert page.url == f"{ui_origin}{url}"
    assert "Spark Master at spark://" in page.title()
    # Spark 4's summary line: "Workers: 2 Alive, 0 Dead, 0 Decommissioned, 0 Unknown".
    alive = page.locator("li", has_text="Workers:").first.inner_text()
    assert re.search(rf"Workers:\s*{workers} Alive", alive), alive
    # Spark's own reverse proxy (spark.ui.reverseProxyUrl = this portal path) links every
    # worker under the master's UI; the link is followed through the portal.
    links = page.locator(f"a[href^='/clusters/{cluster.id}/ui/'][href*='/proxy/worker-']")
    assert links.count() == workers
    links.first.click()
    page.wait_for_load_state()
    assert page.url.startswith(f"{ui_origin}/clusters/{cluster.id}/ui/")
    assert "Spark Worker at" in page.title()

    # An application on the master: its UI (4040) is served through the portal too; with
    # Spark's reverse proxy it sends the browser on to the master's path for the application.
    start_application(master)
    app_ui = ui_path(cluster, 4040)
    deadline = time.monotonic() + 90
    while True:  # 502 until the driver listens, then "Spark is starting up" for a moment
        answer = page.goto(app_ui)
        if "Spark Jobs" in page.title() or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert answer.status == 200
    assert "ui-probe - Spark Jobs" in page.title(), page.content()[:2000]
    assert page.url.startswith(f"{ui_origin}/clusters/{cluster.id}/ui/")
    page.get_by_role("link", name="Executors").click()
    # Filled by the page's scripts from Spark's REST API (through the portal too); the
    # driver's first answer can take a while on the lab's two shared cores.
    page.wait_for_selector("#active-executors-table tbody tr", timeout=60_000)
    assert refused == []  # the pages' scripts and styles ran under the proxy's policy

    other = context.browser.new_context(base_url=live_server.url)
    try:
        stranger = other.new_page()
        sign_in(stranger, "bob", "bob-pass-123")
        assert stranger.goto(url).status == 404
        assert stranger.goto(page.url.replace(ui_origin, "")).status == 404
        # On the UI host itself, without a cookie of its own: nothing either.
        assert stranger.goto(page.url).status == 403
    finally:
        other.close()


def test_the_namenode_and_resourcemanager_pages_load_through_the_portal(
    dispatching, lab_cleanup, alice, bob
):
    cluster = launch_default(alice, "hadoop", "ui-hadoop")
    master = instance(cluster, "master")
    assert_host_reaches(master.address.ip)
    namenode = ui_path(cluster, 9870)
    owner = open_ui(alice, namenode)
    answer = owner.get(f"{namenode}jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")
    assert answer.status_code == 200
    assert b'"beans"' in b"".join(answer.streaming_content)

    manager = ui_path(cluster, 8088)
    owner = open_ui(alice, manager)
    answer = owner.get(manager)  # the RM redirects / to /cluster: kept under the proxy
    assert answer.status_code in (301, 302, 307), answer
    ui_origin = f"http://c{cluster.id}.ui.localhost"
    assert answer["Location"].startswith(f"{ui_origin}/clusters/{cluster.id}/ui/")
    page = owner.get(f"{manager}cluster/nodes")
    assert page.status_code == 200
    html = b"".join(page.streaming_content).decode()
    assert "Nodes of the cluster" in html
    assert f"{manager}static/" in html  # the RM's absolute links, rewritten under the proxy
    assert re.search(r'href="/(?!clusters/)', html) is None

    stranger = Client()
    stranger.force_login(bob)
    assert stranger.get(f"{manager}cluster/nodes").status_code == 404
