import pytest

from apps.proxy.rewrite import LinkRewriter, link_pattern, rewrite_location

ROOT = "/clusters/5/ui"
PREFIX = f"{ROOT}/master-0/8080"
PAGE = (
    b"<link href=\"/static/a.css\"><script src='/s.js'></script><img src=/i.png>"
    b'<a href="//cdn/x">cdn</a><a href="rel/x">r</a><a href="/clusters/5/ui/master-0/8080/x">'
    b'<form action="/kill"><style>p{background:url( "/bg.png" )}</style><a HREF = "/Up">'
    b'<a href="/clusters/6/ui/x">'
)
EXPECTED = (
    b'<link href="/clusters/5/ui/master-0/8080/static/a.css">'
    b"<script src='/clusters/5/ui/master-0/8080/s.js'></script>"
    b"<img src=/clusters/5/ui/master-0/8080/i.png>"
    b'<a href="//cdn/x">cdn</a><a href="rel/x">r</a><a href="/clusters/5/ui/master-0/8080/x">'
    b'<form action="/clusters/5/ui/master-0/8080/kill">'
    b'<style>p{background:url( "/clusters/5/ui/master-0/8080/bg.png" )}</style>'
    b'<a HREF = "/clusters/5/ui/master-0/8080/Up">'
    b'<a href="/clusters/5/ui/master-0/8080/clusters/6/ui/x">'
)


def rewrite(chunks: list[bytes]) -> bytes:
    return b"".join(LinkRewriter(link_pattern(ROOT), PREFIX).rewrite(chunks))


def test_it_rewrites_absolute_paths_and_leaves_the_rest():
    assert rewrite([PAGE]) == EXPECTED


def test_it_gives_the_same_result_wherever_the_chunks_split():
    # Padding makes the page longer than what the rewriter holds back between chunks.
    padded = b"x" * 700 + PAGE + b"y" * 700
    want = b"x" * 700 + EXPECTED + b"y" * 700
    for cut in range(0, len(padded), 7):
        assert rewrite([padded[:cut], padded[cut:]]) == want, cut
    assert rewrite([bytes([b]) for b in padded]) == want


def test_it_streams_a_long_page_instead_of_holding_it():
    rewriter = LinkRewriter(link_pattern(ROOT), PREFIX)
    first = rewriter.feed(b'<a href="/a">' + b"z" * 5000)
    assert first.startswith(b'<a href="/clusters/5/ui/master-0/8080/a">')
    assert len(first) > 4000


ORIGIN = "http://c5.ui.localhost:8000"
CURRENT = f"{PREFIX}/jobs/job/"
MEMBERS = {
    "10.213.0.5": "master-0",
    "master-0": "master-0",
    "10.213.0.6": "worker-0",
    "worker-0": "worker-0",
}


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/target?x=1", f"{PREFIX}/target?x=1"),
        ("target", f"{PREFIX}/jobs/job/target"),
        ("../up", f"{PREFIX}/jobs/up"),
        ("?id=3", f"{CURRENT}?id=3"),
        (f"{PREFIX}/already", f"{PREFIX}/already"),
        ("http://10.213.0.5:8080/p?q=1", f"{ROOT}/master-0/8080/p?q=1"),
        ("http://MASTER-0:8080/p", f"{ROOT}/master-0/8080/p"),
        ("http://worker-0:8081", f"{ROOT}/worker-0/8081/"),
        ("http://10.213.0.6/x", f"{ROOT}/worker-0/80/x"),
        ("//worker-0:8081/x", f"{ROOT}/worker-0/8081/x"),
        (f"{ORIGIN}{PREFIX}/x", f"{PREFIX}/x"),  # a UI that knows its public URL
    ],
)
def test_it_puts_redirects_inside_the_cluster_on_its_ui_origin(location, expected):
    assert rewrite_location(location, PREFIX, ROOT, MEMBERS, ORIGIN, CURRENT) == ORIGIN + expected


@pytest.mark.parametrize(
    "location",
    [
        "http://10.1.2.3/x",  # an address that is no member
        "https://example.org/",
        "//evil.example/x",
        "\\\\evil.example/x",  # browsers read backslashes as slashes
        "/\\evil.example/x",
        "\\/evil.example/x",
        "/\t/evil.example/x",  # browsers drop tabs and newlines
        "/\n/evil.example",
        " //evil.example",
        "javascript:alert(1)",
        "data:text/html,x",
        "http://worker-0:notaport/",
        "/../../../admin/",  # climbs out of the cluster's root
        "../../../../../api/v1/tokens",
        f"{ORIGIN}/api/v1/tokens",  # this host, outside the cluster's root
        "http://c6.ui.localhost:8000/clusters/6/ui/master-0/8080/",  # another cluster's host
        "",
    ],
)
def test_it_refuses_redirects_that_would_leave_the_cluster(location):
    assert rewrite_location(location, PREFIX, ROOT, MEMBERS, ORIGIN, CURRENT) is None
