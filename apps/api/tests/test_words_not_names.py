"""API messages name things in words (the fields' keys stay: they are the API)."""

from apps.accounts.models import Quota


def test_the_api_says_what_was_not_found_not_the_model_class(api, admin_user):
    response = api("admin").get("/api/v1/clusters/999999")
    assert response.status_code == 404
    assert response.json()["message"] == "no such cluster"
    node = api("admin").get("/api/v1/nodes/999999")
    assert (node.status_code, node.json()["message"]) == (404, "no such node")


def test_the_api_quota_message_is_in_words_and_keeps_the_limit_key(api, alice, demo):
    Quota.objects.create(user=alice, max_clusters=0)
    response = api("owner").post("/api/v1/products/demo/1.0", {"size": 1}, format="json")
    assert response.status_code == 403
    body = response.json()
    assert body["message"] == "the quota of user alice is 0 clusters: 0 in use, 1 more asked"
    assert body["quota"]["limit"] == "max_clusters"
