import pytest
from django.test import Client
from .conftest import make_cluster
from apps.clusters.tests.factories import make_network, make_node

BIG = "9" * 5000

@pytest.fixture
def world(alice, bob, admin_user, demo):
    make_network(); node = make_node(cores=16, memory_mb=16384, disks={"hdd": 6, "ssd": 2})
    c = make_cluster(alice, demo, name="w", size=1)
    return node, c

def show(label, r):
    print("PROBE", label, r.status_code, (r.content[:150] if r.status_code >= 400 else b""))

def test_probe(api, world, demo):
    node, c = world
    a = api("admin"); o = api("owner")
    a.raise_request_exception = False; o.raise_request_exception = False
    cl = Client(raise_request_exception=False)
    show("nul path", cl.get("/bigdata/api/v1/products/%00"))
    show("nul path api", o.get("/api/v1/products/%00/1"))
    show("nul query", o.get("/api/v1/clusters?user=%00"))
    show("nul query2", o.get(f"/api/v1/clusters/{c.id}/events?since=%00"))
    show("nul query3", o.get(f"/api/v1/clusters/{c.id}/logs?instance=%00"))
    show("nul body", o.post("/api/v1/clusters", {"product": "demo\x00", "version": "1.0"}, format="json"))
    show("nul name", o.post("/api/v1/clusters", {"product": "demo", "version": "1.0", "name": "a\x00"}, format="json"))
    show("nul option", o.post("/api/v1/clusters", {"product": "demo", "version": "1.0", "size": "1\x00"}, format="json"))
    show("big quota", a.post("/api/v1/quotas", {"user": "bob", "max_cores": BIG}, format="json"))
    show("big quota int", a.post("/api/v1/quotas", {"user": "bob", "max_cores": 10**30}, format="json"))
    show("big quota 3e9", a.post("/api/v1/quotas", {"user": "bob", "max_cores": 3*10**9}, format="json"))
    show("big size", o.post("/api/v1/clusters", {"product": "demo", "version": "1.0", "size": BIG}, format="json"))
    show("big size int", o.post("/api/v1/clusters", {"product": "demo", "version": "1.0", "size": 10**30}, format="json"))
    show("big reuse", o.post("/api/v1/clusters", {"product": "demo", "version": "1.0", "reuse_data_from": BIG}, format="json"))
    show("big reuse int", o.post("/api/v1/clusters", {"product": "demo", "version": "1.0", "reuse_data_from": 10**30}, format="json"))
    show("big lease", o.post("/api/v1/clusters", {"product": "demo", "version": "1.0", "lease": 1e308}, format="json"))
    show("big page", o.get("/api/v1/clusters?page=" + BIG))
    show("big page_size", o.get("/api/v1/clusters?page_size=" + BIG))
    show("big pk", o.get("/api/v1/clusters/" + "9"*30))
    show("big pk node", a.get("/api/v1/nodes/" + "9"*30))
    show("big pk node5000", a.get("/api/v1/nodes/" + BIG))
    show("big pk quota", a.get("/api/v1/quotas/" + "9"*30))
    show("big pk token", o.delete("/api/v1/tokens/" + "9"*30))
    show("big pk key", o.get("/api/v1/ssh-keys/" + "9"*30))
    show("big events limit", o.get(f"/api/v1/clusters/{c.id}/events?limit={BIG}"))
    show("big tail", o.get(f"/api/v1/clusters/{c.id}/logs?tail={BIG}"))
    show("big queue cesga", o.get("/bigdata/api/v1/queue/" + "9"*30))
    show("extend nan", o.post(f"/api/v1/clusters/{c.id}/extend", {"hours": "nan"}, format="json"))
    show("extend inf", o.post(f"/api/v1/clusters/{c.id}/extend", {"hours": "inf"}, format="json"))
    show("extend big", o.post(f"/api/v1/clusters/{c.id}/extend", {"hours": BIG}, format="json"))
    show("token big", o.post("/api/v1/tokens", {"name": "x", "expires_in_days": BIG}, format="json"))
    show("bad auth nul", Client().get("/api/v1/clusters", HTTP_AUTHORIZATION="Bearer plt_\x00abc"))
    show("bad cesga nul", Client().get("/bigdata/api/v1/products", HTTP_X_AUTH_TOKEN="plt_\x00abc"))
    wc = Client(raise_request_exception=False); wc.force_login(c.owner)
    for h in ["nan", "inf", "-inf", "1e308", BIG]:
        show("web extend " + h[:10], wc.post(f"/clusters/{c.id}/extend", {"hours": h}))
