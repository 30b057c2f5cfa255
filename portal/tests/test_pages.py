def test_the_home_page_renders_for_anonymous_visitors(client, db):
    response = client.get("/")
    assert response.status_code == 200
    assert b"Sign in" in response.content
    assert b"django_htmx/htmx-2.min.js" in response.content


def test_the_home_page_greets_a_signed_in_user(client, alice):
    client.force_login(alice)
    response = client.get("/")
    assert b"Signed in as <strong>alice</strong>" in response.content
