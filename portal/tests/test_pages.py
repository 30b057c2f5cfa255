def test_the_home_page_renders_for_anonymous_visitors(client, db):
    response = client.get("/")
    assert response.status_code == 200
    assert b"Sign in" in response.content
    assert b"django_htmx/htmx-2.min.js" in response.content


def test_the_home_page_greets_a_signed_in_user(client, alice):
    client.force_login(alice)
    response = client.get("/")
    assert b"Signed in as <strong>alice</strong>" in response.content


def test_a_demo_user_signs_in_with_the_form_and_lands_on_home(client, alice):
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}, follow=True
    )
    assert response.redirect_chain[-1][0] == "/"
    assert b"Signed in as <strong>alice</strong>" in response.content


def test_a_wrong_password_is_refused_with_a_message(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b'role="alert"' in response.content
    assert "_auth_user_id" not in client.session


def test_signing_out_takes_a_post(client, alice):
    client.force_login(alice)
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert "_auth_user_id" not in client.session
