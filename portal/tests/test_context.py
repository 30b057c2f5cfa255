from django.test import override_settings

from portal import context


def test_it_answers_a_fresh_request_id(client, db):
    response = client.get("/healthz")
    assert len(response["X-Request-ID"]) == 32


def test_it_keeps_a_callers_request_id_that_looks_like_one(client, db):
    response = client.get("/healthz", HTTP_X_REQUEST_ID="proxy-abc-123")
    assert response["X-Request-ID"] == "proxy-abc-123"


def test_it_replaces_a_request_id_that_does_not_look_like_one(client, db):
    response = client.get("/healthz", HTTP_X_REQUEST_ID="x\nInjected: yes")
    assert response["X-Request-ID"] != "x\nInjected: yes"
    assert len(response["X-Request-ID"]) == 32


def test_it_takes_the_address_from_remote_addr_without_proxies(rf):
    request = rf.get("/", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR="6.6.6.6")
    assert context.address_of(request) == "10.0.0.9"


@override_settings(TRUSTED_PROXY_HOPS=1)
def test_it_takes_the_entry_the_trusted_proxy_appended(rf):
    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 192.0.2.7")
    assert context.address_of(request) == "192.0.2.7"


def test_bound_values_are_restored_after_the_block():
    with context.bound(cluster_id=7, request_id="abc"):
        assert context.cluster_id.get() == 7
        assert context.request_id.get() == "abc"
    assert context.cluster_id.get() is None
    assert context.request_id.get() is None
