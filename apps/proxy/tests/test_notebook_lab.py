"""A Spark cluster's notebook on the real lab, through the real web server (gunicorn with
uvicorn workers) as a browser uses it: the owner follows the portal's ticket redirect to the
cluster's UI host, starts a kernel over Jupyter's REST API, runs a Spark count over the kernel's
WebSocket, and sees the application on the Spark master; a saved notebook is found again after
a stop and start; another user and an anonymous request cannot open it."""

import asyncio
import json
import os
import time
import uuid
from urllib.parse import urlsplit

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from websockets.asyncio.client import connect

from apps import nodes
from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.clusters import access, credentials, services
from apps.clusters.container_specs import container_name
from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.waiting import wait_for
from apps.lab import devservers
from apps.lab.management.commands.seed_demo import DEMO_QUOTA
from apps.lab.tests.test_devservers import free_port
from apps.proxy import tickets
from apps.proxy.tests.test_lab import assert_host_reaches
from conftest import _database_url
from portal.tests.test_streams_server import session_of
from workers import reconciler
from workers.tests.lab_products import READY_SECONDS, instance

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.fixture
def portal(django_db_setup, tmp_path):
    """The portal on the real web server at 127.0.0.1:<port>, its UI hosts c<N>.ui.localhost."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(settings.DATABASES["default"]),
        "GUNICORN_WORKERS": "1",
        "PLATTER_UI_DOMAIN": "ui.localhost",
        # Requests made through it (a notebook added) reach the worker as the test's own do
        # under `dispatching`; the test settings keep them in the process otherwise.
        "PLATTER_DISPATCH_CLUSTER_TASKS": "1" if settings.DISPATCH_CLUSTER_TASKS else "0",
    }
    log = (tmp_path / "web.log").open("w")
    server = devservers.start_web(f"127.0.0.1:{port}", env, log)
    try:
        devservers.wait_for_web(f"127.0.0.1:{port}", server)
        yield port
    finally:
        devservers.stop_process(server)
        log.close()


class UIHost:
    """A browser's view of a cluster's UI host: requests to cN.ui.localhost:<port> (sent to
    127.0.0.1, *.localhost being loopback for browsers) with the cookie that host gave."""

    def __init__(self, port: int, cluster_id: int, cookie: str) -> None:
        self.port = port
        self.host = f"c{cluster_id}.ui.localhost:{port}"
        self.origin = f"http://{self.host}"
        self.cookie = cookie
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)

    def request(self, method: str, path: str, **options) -> httpx.Response:
        headers = {"Host": self.host, "Cookie": self.cookie, **options.pop("headers", {})}
        if method not in ("GET", "HEAD"):
            headers["Origin"] = self.origin  # a page of this very host writes
        return self.http.request(method, path, headers=headers, **options)

    def websocket(self, path: str):
        return connect(
            f"ws://{self.host}{path}",
            origin=self.origin,  # type: ignore[arg-type]
            additional_headers={"Cookie": self.cookie},
            host="127.0.0.1",
            port=self.port,
            open_timeout=180,
            max_size=None,
            proxy=None,
        )


def open_as(port: int, session: str | None, path: str) -> httpx.Response:
    """GET a UI's portal path as a browser's navigation, not following redirects."""
    cookies = {"sessionid": session} if session else {}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", cookies=cookies, timeout=30) as web:
        return web.get(path, headers={"Sec-Fetch-Mode": "navigate"})


def ui_host_for(port: int, session: str, cluster: Cluster, path: str) -> UIHost:
    """Follow the portal's redirects for a ticket as a browser does (to the UI host for a
    nonce, back to the portal for a ticket bound to it, to the UI host with the ticket); the
    UI host's cookie."""
    answer = open_as(port, session, path)
    assert answer.status_code == 302, answer.text[:500]
    bind = urlsplit(answer.headers["location"])
    assert bind.netloc == f"c{cluster.id}.ui.localhost:{port}"
    ui = UIHost(port, cluster.id, "")
    back = ui.request("GET", f"{bind.path}?{bind.query}")
    assert back.status_code == 302, back.text[:500]
    nonce = tickets.bind_cookie_name()
    ui.cookie = f"{nonce}={back.cookies[nonce]}"
    portal = urlsplit(back.headers["location"])  # the portal that sent the browser
    minted = open_as(port, session, f"{portal.path}?{portal.query}")
    assert minted.status_code == 302, minted.text[:500]
    ticket = urlsplit(minted.headers["location"])
    assert ticket.netloc == bind.netloc
    redeemed = ui.request("GET", f"{ticket.path}?{ticket.query}")
    assert redeemed.status_code == 302 and redeemed.headers["location"] == path
    name = settings.UI_COOKIE_NAME
    ui.cookie = f"{name}={redeemed.cookies[name]}"
    return ui


def wait_until_up(ui: UIHost, path: str, seconds: float = 180) -> httpx.Response:
    """The answer once the UI answers 200 (502 while the server starts)."""
    deadline = time.monotonic() + seconds
    while True:
        answer = ui.request("GET", path)
        if answer.status_code == 200 or time.monotonic() > deadline:
            return answer
        time.sleep(2)


def execute(ui: UIHost, jupyter: str, kernel_id: str, code: str) -> dict:
    """Run code in the kernel over its WebSocket (Jupyter's JSON protocol, as JupyterLab
    speaks it without a subprotocol): the result's text/plain, or the error."""

    async def run() -> dict:
        session = uuid.uuid4().hex
        path = f"{jupyter}api/kernels/{kernel_id}/channels?session_id={session}"
        async with ui.websocket(path) as channels:
            msg_id = uuid.uuid4().hex
            await channels.send(
                json.dumps(
                    {
                        "header": {
                            "msg_id": msg_id,
                            "username": "alice",
                            "session": session,
                            "msg_type": "execute_request",
                            "version": "5.3",
                        },
                        "parent_header": {},
                        "metadata": {},
                        "channel": "shell",
                        "content": {
                            "code": code,
                            "silent": False,
                            "store_history": True,
                            "user_expressions": {},
                            "allow_stdin": False,
                            "stop_on_error": True,
                        },
                    }
                )
            )
            seen: dict = {}
            idle = False
            async with asyncio.timeout(300):  # the session starts with the kernel: a while
                # Done once the shell's reply and iopub's "idle" have both come: the two
                # channels are not ordered, so the result may follow the reply.
                while not (idle and "status" in seen):
                    message = json.loads(await channels.recv())
                    if message.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind, content = message["msg_type"], message["content"]
                    if kind == "execute_result":
                        seen["result"] = content["data"]["text/plain"]
                    elif kind == "error":
                        seen["error"] = "\n".join(content["traceback"])[-3000:]
                    elif kind == "execute_reply":
                        seen["status"] = content["status"]
                    elif kind == "status" and content.get("execution_state") == "idle":
                        idle = True
            return seen

    return asyncio.run(run())


# Run on another member of the cluster (inside any perimeter): JupyterLab's answers, without
# the portal's token, to reading its status and kernels, opening a terminal and loading the
# page, one "STATUS METHOD PATH LOCATION" line each (redirects not followed).
DIRECT = """import sys, urllib.error as e, urllib.request as u
class Stay(u.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None
opener = u.build_opener(Stay)
for method, path in (("GET", "api/status"), ("GET", "api/kernels"),
                     ("POST", "api/terminals"), ("GET", "lab")):
    asked = u.Request(sys.argv[1] + path, method=method, data=b"{}" if method == "POST" else None)
    try:
        code, where = opener.open(asked, timeout=10).status, ""
    except e.HTTPError as error:
        code, where = error.code, error.headers.get("Location", "")
    print(code, method, path, where)
"""


def refused_without_the_token(answers: list[str]) -> bool:
    """Every answer a 403, or a redirect to JupyterLab's login page."""
    for line in answers:
        code, _, _, *where = line.split()
        if not (code == "403" or (code == "302" and where and "/login" in where[0])):
            return False
    return bool(answers)


def assert_jupyterlab_refuses_without_the_token(cluster: Cluster, notebook: Instance, jupyter: str):
    """JupyterLab itself, reached at its own address without the portal's token, answers
    nothing but a refusal: from the cluster's master (a member, inside every perimeter), and
    from the host (another person on the site network; the perimeter may not even connect)."""
    assert notebook.address is not None
    direct = f"http://{notebook.address.ip}:8888{jupyter}"
    master = instance(cluster, "master")
    assert master.node is not None
    code, output = nodes.client(master.node).exec(
        container_name(cluster.id, master.role, master.index), ["python3", "-c", DIRECT, direct], 60
    )
    answers = [line for line in output.splitlines() if line.strip()]
    assert code == 0 and len(answers) == 4 and refused_without_the_token(answers), output
    with httpx.Client(timeout=10) as stranger:
        try:
            terminal = stranger.post(f"{direct}api/terminals", json={})
        except httpx.TransportError:
            return  # the perimeter does not let the host connect at all
    assert terminal.status_code == 403, terminal.text[:500]


def launch_with_notebook(owner) -> Cluster:
    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=owner, defaults=DEMO_QUOTA)
    version = ProductVersion.objects.get(product__name="spark", version="4.3.0")
    launched = services.launch(owner, version, "nb", {"notebook": True, "size": 1})
    return wait_for(launched.id, S.RUNNING, seconds=READY_SECONDS)


NOTEBOOK = {
    "type": "notebook",
    "format": "json",
    "content": {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {
                "cell_type": "code",
                "id": "count",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": "spark.range(1000).count()",
            }
        ],
    },
}


@pytest.mark.timeout(1800)  # a launch, a restart (up to 5 min each on the shared lab), a kernel
def test_the_owner_runs_spark_in_a_notebook_that_outlives_a_stop_and_start(
    dispatching, lab_cleanup, portal, alice, bob
):
    cluster = launch_with_notebook(alice)
    notebook = instance(cluster, "notebook")
    assert notebook.disks == 1
    assert_host_reaches(notebook.address.ip)
    uis = {ui["name"]: ui["url"] for ui in access.web_uis(cluster)}
    jupyter = uis["JupyterLab"]
    assert jupyter == f"/clusters/{cluster.id}/ui/{notebook.hostname}/8888/"

    # Others: bob gets 404 on the portal, an anonymous browser the sign-in page, and neither
    # has a cookie for the UI host, which sends them away (HTTP) or refuses (WebSocket).
    assert open_as(portal, session_of(bob), jupyter).status_code == 404
    anonymous = open_as(portal, None, jupyter)
    assert anonymous.status_code == 302 and "/login" in anonymous.headers["location"]
    stranger = UIHost(portal, cluster.id, "")
    assert stranger.request("GET", f"{jupyter}api/status").status_code == 403

    ui = ui_host_for(portal, session_of(alice), cluster, jupyter)
    lab = wait_until_up(ui, f"{jupyter}lab")
    assert lab.status_code == 200 and "JupyterLab" in lab.text, lab.text[:1000]
    # The page the owner gets carries no token; JupyterLab without it refuses everyone.
    token = credentials.ensure_credentials(cluster).ui_token
    assert token and token not in lab.text and token not in str(lab.headers)
    assert_jupyterlab_refuses_without_the_token(cluster, notebook, jupyter)
    saved = ui.request("PUT", f"{jupyter}api/contents/saved.ipynb", json=NOTEBOOK)
    assert saved.status_code in (200, 201), saved.text[:1000]
    session = ui.request(
        "POST",
        f"{jupyter}api/sessions",
        json={"path": "saved.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
    )
    assert session.status_code == 201, session.text[:1000]
    kernel_id = session.json()["kernel"]["id"]

    seen = execute(ui, jupyter, kernel_id, "spark.range(1000).count()")
    assert seen == {"result": "1000", "status": "ok"}, seen
    master = instance(cluster, "master")
    status = ui.request("GET", f"/clusters/{cluster.id}/ui/{master.hostname}/8080/json/")
    apps = {a["name"]: a["id"] for a in status.json()["activeapps"]}
    assert f"notebook on {notebook.hostname}" in apps, status.json()
    # The master's UI kills nothing (spark.ui.killEnabled=false): the owner's own page's
    # kill form, sent through the proxy, leaves the notebook's application running.
    app_id = apps[f"notebook on {notebook.hostname}"]
    ui.request(
        "POST",
        f"/clusters/{cluster.id}/ui/{master.hostname}/8080/app/kill/",
        data={"id": app_id, "terminate": "true"},
    )
    time.sleep(5)
    status = ui.request("GET", f"/clusters/{cluster.id}/ui/{master.hostname}/8080/json/")
    assert app_id in [a["id"] for a in status.json()["activeapps"]], status.json()

    services.request_stop(cluster.id)
    wait_for(cluster.id, S.STOPPED, seconds=180)
    services.request_start(cluster.id)
    wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)
    again = wait_until_up(ui, f"{jupyter}api/contents/saved.ipynb")
    assert again.status_code == 200, again.text[:1000]
    cells = again.json()["content"]["cells"]
    assert [c["source"] for c in cells] == ["spark.range(1000).count()"]


@pytest.mark.timeout(1200)  # a launch (up to 5 min on the shared lab), then JupyterLab's load
def test_jupyterlab_opens_from_the_cluster_page_in_chromium(
    dispatching, lab_cleanup, portal, alice, browser
):
    cluster = launch_with_notebook(alice)
    base = f"http://127.0.0.1:{portal}"
    context = browser.new_context(base_url=base, viewport={"width": 1200, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": session_of(alice), "url": base}])
    try:
        page = context.new_page()
        page.goto(reverse("web:cluster", args=[cluster.id]))
        page.get_by_role("link", name="JupyterLab", exact=True).click()
        # The portal checks the session and sends the browser to the cluster's own origin.
        page.wait_for_url(f"http://c{cluster.id}.ui.localhost:{portal}/**", timeout=60_000)
        deadline = time.monotonic() + 180
        while "JupyterLab" not in page.title() and time.monotonic() < deadline:
            time.sleep(3)  # 502 until Jupyter listens
            page.reload()
        # JupyterLab's own scripts build the launcher (its kernel spec listed) in the page.
        card = page.locator(".jp-LauncherCard", has_text="PySpark").first
        card.wait_for(timeout=180_000)
        assert "PySpark 4.3.0" in card.inner_text()
    finally:
        context.close()


@pytest.mark.timeout(1500)  # a launch and a grow (up to 5 min each on the shared lab)
def test_a_notebook_added_through_the_api_opens_through_the_proxy(
    dispatching, lab_cleanup, portal, alice
):
    from apps.api.tests.conftest import token_for

    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=alice, defaults=DEMO_QUOTA)
    version = ProductVersion.objects.get(product__name="spark", version="4.3.0")
    launched = services.launch(alice, version, "nb-later", {"size": 1})
    cluster = wait_for(launched.id, S.RUNNING, seconds=READY_SECONDS)
    assert not cluster.instances.filter(role="notebook").exists()

    bearer = {"Authorization": f"Bearer {token_for(alice)}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{portal}", timeout=60) as api:
        added = api.post(f"/api/v1/clusters/{cluster.id}/notebook", headers=bearer)
        assert added.status_code == 202, added.text[:1000]
        assert added.json()["notebook"]["state"] == "adding"
        cluster = wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)
        assert cluster.options["notebook"] is True
        assert not cluster.events.filter(message__startswith="resize failed").exists()
        notebook = instance(cluster, "notebook")
        assert notebook.disks == 1 and notebook.hostname == "notebook-0"
        again = api.post(f"/api/v1/clusters/{cluster.id}/notebook", headers=bearer)
        assert again.status_code == 409, again.text[:1000]

        uis = {ui["name"]: ui["url"] for ui in access.web_uis(cluster)}
        jupyter = uis["JupyterLab"]
        ui = ui_host_for(portal, session_of(alice), cluster, jupyter)
        status = wait_until_up(ui, f"{jupyter}api/status")
        assert status.status_code == 200, status.text[:1000]
        assert "started" in status.json()

        # The reconciler's probe (beat runs it every 30 s; here, no beat) finds it answering.
        deadline = time.monotonic() + 120
        while not reconciler.probe_notebooks() and time.monotonic() < deadline:
            time.sleep(5)
        shown = api.get(f"/api/v1/clusters/{cluster.id}", headers=bearer).json()["notebook"]
        assert shown["state"] == "ready", shown
