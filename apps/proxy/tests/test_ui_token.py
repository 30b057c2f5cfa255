"""A web UI that takes the cluster's UI token (JupyterLab): the proxy adds it to every request
upstream, no browser can supply or replace it, and it never comes back to a browser, neither in
a page, a header, a redirect nor any other body."""

import json

import pytest

from apps.clusters import access, credentials
from apps.clusters.models import Instance
from apps.proxy.rewrite import Scrubber, without
from apps.proxy.tests.upstream import cluster_on, open_ui, start_upstream

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def upstream():
    server = start_upstream()
    yield server
    server.shutdown()


@pytest.fixture
def cluster(alice, upstream):
    """alice's cluster whose master UI (the upstream) requires the UI token; its second UI
    (another port of the same upstream) does not."""
    cluster = cluster_on(alice, upstream.server_port, upstream.server_port + 1)
    version = cluster.version
    version.ports[0]["token"] = True
    version.save()
    upstream.cluster_root = f"/clusters/{cluster.id}/ui"
    upstream.token = credentials.ensure_credentials(cluster).ui_token
    upstream.headers.clear()
    return cluster


@pytest.fixture
def ui(cluster, upstream):
    return f"/clusters/{cluster.id}/ui/master-0/{upstream.server_port}"


@pytest.fixture
def owner(alice, ui):
    return open_ui(alice, f"{ui}/")


def got(response) -> bytes:
    """Everything a browser receives: status line facts, headers and body."""
    body = b"".join(response.streaming_content) if response.streaming else response.content
    head = "\n".join(f"{k}: {v}" for k, v in response.items()).encode()
    return head + b"\n\n" + body


def test_it_sends_the_token_upstream_in_place_of_the_browsers(owner, ui, upstream):
    token = upstream.token
    response = owner.get(
        f"{ui}/echo?token=guessed&x=1", HTTP_AUTHORIZATION="token guessed-by-the-browser"
    )
    assert response.status_code == 200
    seen = upstream.headers[-1]
    assert seen["authorization"] == f"token {token}"
    path = upstream.seen[-1][1]
    assert path == "/echo?x=1"  # the browser's token parameter stays behind
    assert token.encode() not in got(response)  # the echoed header is masked on the way back


def test_a_post_carries_the_token_too(owner, ui, upstream, cluster):
    origin = f"http://c{cluster.id}.ui.localhost"
    response = owner.post(
        f"{ui}/api/terminals", data="{}", HTTP_ORIGIN=origin, content_type="application/json"
    )
    assert response.status_code == 200
    assert upstream.headers[-1]["authorization"] == f"token {upstream.token}"
    assert upstream.token.encode() not in got(response)


def test_the_token_never_reaches_the_browser(owner, ui, upstream):
    token = upstream.token.encode()
    page = owner.get(f"{ui}/lab")  # the page writes it into its config and a header
    received = got(page)
    assert page.status_code == 200 and b"jupyter-config-data" in received
    assert token not in received
    config = json.loads(received.split(b'data">')[1].split(b"</script>")[0])
    assert config["token"] == "*" * len(token)  # masked; its echo as ?token= is dropped
    data = owner.get(f"{ui}/token.json")  # a body passed as it is: same length, masked
    received = got(data)
    assert data.status_code == 200 and token not in received
    assert json.loads(received.split(b"\n\n", 1)[1])["token"] == "*" * len(token)
    moved = owner.get(f"{ui}/token-redirect")
    assert moved.status_code == 302 and token not in got(moved)
    assert moved["Location"].endswith(f"{ui}/lab?token=")


def test_only_a_ui_declared_with_the_token_gets_it(owner, ui, cluster, upstream):
    version = cluster.version
    version.ports[0]["token"], version.ports[1]["token"] = False, True  # another port's now
    version.save()
    response = owner.get(f"{ui}/echo")
    assert response.status_code == 200
    assert "authorization" not in upstream.headers[-1]


def test_only_instances_serving_a_token_ui_are_given_the_token(cluster, upstream):
    master = Instance.objects.get(cluster=cluster, role="master")
    worker = Instance.objects.get(cluster=cluster, role="worker")
    assert access.instance_environment(cluster, master)["PLATTER_UI_TOKEN"] == upstream.token
    assert "PLATTER_UI_TOKEN" not in access.instance_environment(cluster, worker)


def test_each_cluster_gets_a_token_of_its_own_even_when_reusing_data(alice, upstream):
    first = cluster_on(alice, upstream.server_port, upstream.server_port + 1)
    first.name, first.state = "first", "destroyed"
    first.save()
    second = cluster_on(alice, upstream.server_port, upstream.server_port + 1)
    second.reuse_data_of = first
    second.save()
    one, two = credentials.ensure_credentials(first), credentials.ensure_credentials(second)
    assert (two.username, two.password, two.secret) == (one.username, one.password, one.secret)
    assert len(one.ui_token) == 64 and len(two.ui_token) == 64
    assert one.ui_token != two.ui_token
    assert one.ui_token not in credentials.redact(f"token={one.ui_token}", one)


@pytest.mark.parametrize("size", [1, 2, 7, 63, 64, 65, 1000])
def test_the_scrubber_masks_a_secret_split_anywhere_between_chunks(size):
    secret = "ab12" * 16
    body = f"<p>{secret}</p>{secret[:10]}{secret}{secret[10:]}tail".encode()
    scrub = Scrubber(secret)
    out = b"".join(scrub.feed(body[i : i + size]) for i in range(0, len(body), size))
    out += scrub.flush()
    assert secret.encode() not in out and len(out) == len(body)
    assert out.startswith(b"<p>" + b"*" * 64 + b"</p>") and out.endswith(b"tail")
    assert Scrubber("").feed(body) == body  # no secret: passed as it comes
    assert without(f"x{secret[:10]}{secret}{secret[10:]}y", secret) == "xy"  # nested: cut again
