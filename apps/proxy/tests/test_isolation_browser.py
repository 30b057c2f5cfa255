"""A tenant's hostile web UI in a real browser (Chromium), opened by staff: its script cannot
read the portal's cookies, call the portal's API as the viewer, install a service worker, or
read or post to another cluster's UI; and the owner still uses the UI, its links and forms.

The "UI" is a tiny HTTP server on 127.0.0.1 that the test clusters' master points at (as the
proxy's other tests do); the portal is the live server on localhost, each cluster's UI on
c<N>.ui.localhost at the same port."""

import json

import pytest

from apps.proxy.tests.upstream import HOSTILE_PAGE, cluster_on, start_upstream
from apps.web.tests.browsing import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def upstream():
    server = start_upstream()
    yield server
    server.shutdown()


def ui_of(cluster, upstream) -> str:
    return f"/clusters/{cluster.id}/ui/master-0/{upstream.server_port}/"


def origin_of(cluster, live_server) -> str:
    return live_server.url.replace("://localhost", f"://c{cluster.id}.ui.localhost")


@pytest.fixture
def context(browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    context.set_default_timeout(15_000)
    yield context
    context.close()


def test_a_hostile_ui_opened_by_staff_reaches_nothing_beyond_its_own_cluster(
    alice, bob, admin_user, upstream, live_server, context
):
    hostile, other = (
        cluster_on(alice, upstream.server_port, 1),
        cluster_on(bob, upstream.server_port, 1),
    )
    other_url = f"{origin_of(other, live_server)}{ui_of(other, upstream)}"
    upstream.hostile = HOSTILE_PAGE.replace("{portal}", live_server.url).replace(
        "{other}", other_url
    )
    page = context.new_page()
    sign_in(page, "admin", "admin-pass-123")
    # Staff has been to the other cluster's UI: its host holds a cookie for staff.
    page.goto(ui_of(other, upstream) + "echo")
    assert page.url.startswith(other_url)
    assert any(c["domain"] == f"c{other.id}.ui.localhost" for c in context.cookies())

    with page.expect_console_message(lambda m: "form-action" in m.text):
        page.goto(ui_of(hostile, upstream) + "hostile.html")
        # Not a locator: the refused form submission leaves Playwright awaiting a navigation.
        page.wait_for_function("window.results !== undefined")
    assert page.url.startswith(origin_of(hostile, live_server))
    results = page.evaluate("window.results")
    assert set(results) == {
        "portal api in a window",
        "other ui in a window",
        "cookies",
        "portal api",
        "service worker",
        "service worker here",
        "other ui read",
        "other ui post",
    }
    for attempt, outcome in results.items():
        assert outcome.startswith("failed: "), f"{attempt}: {outcome}"
    # Another origin's window: the browser itself refuses (not a page that did not load).
    assert "SecurityError" in results["portal api in a window"]
    assert "SecurityError" in results["other ui in a window"]
    assert not [p for _, p in upstream.seen if "steal" in p]  # nothing reached the other UI
    # The portal's session is untouched and its cookies stay on its own host, HttpOnly.
    portal = [c for c in context.cookies() if c["domain"] == "localhost"]
    assert {c["name"] for c in portal} >= {"sessionid", "csrftoken"}
    assert all(c["httpOnly"] for c in portal)
    assert page.goto(f"{live_server.url}/clusters/").status == 200


def test_the_owner_uses_the_ui_its_links_and_its_forms(alice, upstream, live_server, context):
    cluster = cluster_on(alice, upstream.server_port, 1)
    page = context.new_page()
    sign_in(page, "alice", "alice-pass-123")
    page.goto(f"/clusters/{cluster.id}/")
    assert page.get_by_role("link", name="Master UI").get_attribute("href") == ui_of(
        cluster, upstream
    )
    page.goto(ui_of(cluster, upstream) + "owner.html")
    origin = origin_of(cluster, live_server)
    assert page.url == f"{origin}{ui_of(cluster, upstream)}owner.html"

    page.locator("#link").click()
    page.wait_for_url("**/echo?from=link")
    assert json.loads(page.locator("body").inner_text())["method"] == "GET"
    page.go_back()
    page.get_by_role("button", name="Kill").click()
    page.wait_for_url("**/kill")
    posted = json.loads(page.locator("body").inner_text())
    assert posted["method"] == "POST"
    assert posted["body"] == "app=app-1"
    assert "cookie" not in posted["headers"]  # the UI host's cookie stays with the portal
