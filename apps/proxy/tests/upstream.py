"""A tiny web UI on 127.0.0.1 for the proxy's tests, and a cluster whose master "is" it."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from django.test import Client

from apps.catalog.models import Product, ProductVersion
from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.factories import make_network, make_node
from apps.inventory.models import Address

RELEASE_STREAM = threading.Event()

# A page a tenant could serve on their UI port: its script attacks whoever opens it (the
# portal's cookies and API, a service worker, another cluster's UI) and lists what it got
# in window.results; {portal} and {other} are filled by the test.
HOSTILE_PAGE = """<html><body><p id="status">running</p><script>
const results = {};
async function attempt(name, action) {
  try { results[name] = "succeeded: " + String(await action()).slice(0, 200); }
  catch (error) { results[name] = "failed: " + error; }
}
// A window of another origin: its document is out of reach, whatever the page's policy says
// about fetch (connect-src). Reading it throws a SecurityError once it has left about:blank.
async function readWindow(url) {
  const other = window.open(url, "_blank");
  for (let i = 0; i < 200; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (other.location.href !== "about:blank" && other.document.readyState === "complete") {
      return other.document.body.innerText;
    }
  }
  throw new Error("inconclusive: the window never loaded");
}
(async () => {
  await attempt("portal api in a window", () => readWindow("{portal}/api/v1/tokens"));
  await attempt("other ui in a window", () => readWindow("{other}echo"));
  await attempt("cookies", async () => {
    if (document.cookie) return document.cookie;
    throw new Error("no cookie readable");
  });
  await attempt("portal api", async () => {
    const answer = await fetch("{portal}/api/v1/tokens", {credentials: "include"});
    return answer.status + " " + await answer.text();
  });
  await attempt("service worker", async () => {
    const done = await navigator.serviceWorker.register("sw.js", {scope: "/"});
    return done.scope;
  });
  await attempt("service worker here", async () => {
    const done = await navigator.serviceWorker.register("sw.js");
    return done.scope;
  });
  await attempt("other ui read", async () => {
    const answer = await fetch("{other}echo", {credentials: "include"});
    return answer.status + " " + await answer.text();
  });
  await attempt("other ui post", async () => {
    const answer = await fetch("{other}steal", {
      method: "POST", credentials: "include", mode: "no-cors", body: "x=1",
      headers: {"Content-Type": "application/x-www-form-urlencoded"},
    });
    return answer.type + " " + answer.status;
  });
  window.results = results;
  document.getElementById("status").textContent = "done";
  const form = document.createElement("form");
  form.method = "post"; form.action = "{other}steal-form";
  document.body.appendChild(form);
  form.submit();  // a plain form POST to the other cluster: the page's policy stops it
})();
</script></body></html>"""

# What the owner uses: a link and a form that writes (Spark's kill links are such forms).
OWNER_PAGE = (
    b'<html><body><a id="link" href="/echo?from=link">a link</a>'
    b'<form id="kill" action="/kill" method="post"><input name="app" value="app-1">'
    b'<button type="submit">Kill</button></form></body></html>'
)


class UpstreamServer(ThreadingHTTPServer):
    cluster_root = ""  # the portal's path to this cluster's UIs, set by a test
    hostile = ""  # the hostile page, filled for a test
    # (method, path) of every request, so a test can tell a request never reached the UI.
    seen: list[tuple[str, str]] = []
    headers: list[dict[str, str]] = []  # every request's headers, names in lower case
    token = ""  # a secret the UI writes into /lab, /token.json and a redirect (as Jupyter does)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: UpstreamServer

    def log_message(self, *args) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.command, self.path))
        self.server.headers.append({k.lower(): v for k, v in self.headers.items()})
        path, _, query = self.path.partition("?")
        cluster_root = self.server.cluster_root
        token = self.server.token
        if path == "/lab":  # JupyterLab's page writes its token into its config
            config = json.dumps({"baseUrl": "/", "token": token})
            page = f'<html><head><script id="jupyter-config-data">{config}</script></head></html>'
            self._send(200, page.encode(), "text/html", {"X-Token": f"token={token}"})
        elif path == "/token.json":
            self._send(200, json.dumps({"token": token, "then": token * 3}).encode(), "text/json")
        elif path == "/token-redirect":
            self._send(302, b"", "text/plain", {"Location": f"/lab?token={token}"})
        elif path == "/page.html":
            body = (
                '<html><head><link rel="stylesheet" href="/static/app.css">'
                "<script src='/static/app.js'></script>"
                "<style>body { background: url(/img/bg.png) }</style></head><body>"
                '<a href="/jobs/?id=1">jobs</a> <a HREF = "/Upper">upper</a>'
                '<a href="//cdn.example.org/x.js">cdn</a> <a href="relative/x">rel</a>'
                f'<a href="{cluster_root}/master-0/4040/">already</a>'
                '<form action="/kill" method="post"></form></body></html>'
            ).encode()
            self._send(200, body, "text/html; charset=utf-8", {"Set-Cookie": "ui=1; Path=/"})
        elif path == "/app.css":
            self._send(200, b'a { background: url("/img/a.png") } b { x: url(/b.png) }', "text/css")
        elif path == "/data.bin":
            self._send(200, b'href="/not-rewritten"', "application/octet-stream")
        elif path == "/redirect":
            where = {
                "absolute": f"http://127.0.0.1:{self.server.server_port}/target?x=1",
                "path": "/target",
                "worker": f"http://worker-0:{self.server.server_port}/w",
                "away": "http://10.1.2.3/x",
                "backslash": "\\\\evil.example/x",
            }[query]
            self._send(302, b"", "text/plain", {"Location": where})
        elif path == "/hostile.html":
            self._send(200, self.server.hostile.encode(), "text/html")
        elif path == "/owner.html":
            self._send(200, OWNER_PAGE, "text/html")
        elif path == "/sw.js":
            self._send(
                200, b"self.onfetch = () => {};", "text/javascript", {"Service-Worker-Allowed": "/"}
            )
        elif path == "/browser-headers":
            self._send(
                200,
                b"<p>x</p>",
                "text/html",
                {
                    "Refresh": "0; url=https://evil.example/",
                    "Clear-Site-Data": '"cookies", "storage"',
                    "Service-Worker-Allowed": "/",
                    "Alt-Svc": 'h2="evil.example:443"',
                    "NEL": '{"report_to": "x", "max_age": 1}',
                    "Report-To": '{"group": "x", "endpoints": [{"url": "https://evil.example"}]}',
                },
            )
        elif path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(b"first\n")
            RELEASE_STREAM.wait(10)
            self._chunk(b"last\n")
            self._chunk(b"")
        elif path == "/slow":
            time.sleep(3)
            self._send(200, b"late", "text/plain")
        elif path == "/policy":
            self._send(
                200,
                b"<p>x</p>",
                "text/html",
                {
                    "Content-Security-Policy": "script-src 'nonce-abc'; report-uri http://10.9.9.9/r",
                    "Access-Control-Allow-Origin": "*",
                    "Strict-Transport-Security": "max-age=1",
                    "X-Custom": "kept",
                    "Connection": "close, X-Hop",
                    "X-Hop": "dropped",
                },
            )
        else:
            self._echo()

    def do_POST(self) -> None:
        self.server.seen.append((self.command, self.path))
        self.server.headers.append({k.lower(): v for k, v in self.headers.items()})
        self._echo()

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": self.rfile.read(length).decode(),
            }
        ).encode()
        self._send(200, body, "application/json")

    def _send(self, status: int, body: bytes, content_type: str, headers=None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def start_upstream() -> UpstreamServer:
    server = UpstreamServer(("127.0.0.1", 0), Handler)
    server.seen, server.headers = [], []
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def cluster_on(owner, port: int, closed_port: int) -> Cluster:
    """A running cluster whose master-0 answers at 127.0.0.1 (the upstream) and worker-0 at
    127.0.0.2; port is declared a UI, closed_port a UI nothing listens on, 7077 not a UI."""
    product, _ = Product.objects.get_or_create(name="uitest", defaults={"title": "UI test"})
    version, _ = ProductVersion.objects.update_or_create(
        product=product,
        version="1",
        defaults={
            "image": "example/ui:1",
            "ports": [
                {"role": "master", "port": port, "name": "Master UI", "ui": True},
                {"role": "master", "port": closed_port, "name": "App UI", "ui": True},
                {"role": "master", "port": 7077, "name": "RPC"},
                {"role": "worker", "port": 8081, "name": "Worker UI", "ui": True},
            ],
        },
    )
    cluster = Cluster.objects.create(owner=owner, version=version, name="ui", state="running")
    network, node = make_network(), make_node()
    for role, ip in (("master", "127.0.0.1"), ("worker", "127.0.0.2")):
        Instance.objects.create(
            cluster=cluster,
            role=role,
            index=0,
            hostname=f"{role}-0",
            cores=1,
            memory_mb=64,
            disks=0,
            node=node,
            address=Address.objects.create(network=network, ip=ip),
            active=True,
            state="running",
        )
    return cluster


def go(client: Client, location: str):
    """What client gets for a redirect's Location (absolute or not), not following further."""
    url = urlsplit(location)
    return client.get(f"{url.path}?{url.query}" if url.query else url.path)


def ticket_for(portal: Client, ui_path: str) -> tuple[Client, str]:
    """(the UI host's client, the ticket's path there) once the browser signed in as portal
    opened ui_path: the portal sent it to the UI host, which gave it a nonce and sent it back
    for a ticket bound to that nonce. The UI host's client holds only the nonce cookie."""
    bind = portal.get(ui_path)
    assert bind.status_code == 302, bind
    ui = Client(HTTP_HOST=urlsplit(bind["Location"]).netloc)
    back = go(ui, bind["Location"])
    assert back.status_code == 302, back
    minted = go(portal, back["Location"])
    assert minted.status_code == 302, minted
    ticket = urlsplit(minted["Location"])
    assert ticket.netloc == urlsplit(bind["Location"]).netloc
    return ui, f"{ticket.path}?{ticket.query}"


def open_ui(user, ui_path: str) -> Client:
    """A browser that opened ui_path (a UI's path on the portal) as user: the portal checked
    access and sent it to the cluster's UI host for a ticket (ticket_for), which it exchanged
    for that host's cookie. The client returned talks to the UI host and holds only its
    cookies."""
    portal = Client()
    portal.force_login(user)
    ui, ticket = ticket_for(portal, ui_path)
    redeemed = ui.get(ticket)
    assert redeemed.status_code == 302, redeemed
    assert redeemed["Location"] == ui_path
    return ui
