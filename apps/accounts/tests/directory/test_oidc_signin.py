"""Sign-in with OpenID Connect against a small real provider on a local port (provider.py):
the button on the sign-in page, the authorization code flow with PKCE, an RS256 ID token
checked against the provider's JWKS, userinfo, and the groups claim mapped to quota groups."""

from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from apps.accounts.models import OIDCIdentity, Quota

LOGIN = "/accounts/login/"


def sign_in_with_provider(client, provider, claims: dict, next_url: str = "/"):
    """What a browser does: the button, the provider (which approves `claims`' owner), and
    the redirect back to the portal. Returns the portal's last answer."""
    provider.claims = claims
    start = client.get("/accounts/oidc/authenticate/", {"next": next_url})
    assert start.status_code == 302
    assert start["Location"].startswith(f"{provider.url}/authorize?")
    approved = httpx.get(start["Location"], follow_redirects=False)
    assert approved.status_code == 302, approved.text
    back = urlsplit(approved.headers["Location"])
    assert back.path == "/accounts/oidc/callback/"
    return client.get(f"{back.path}?{back.query}")


def signed_in_as(client) -> str | None:
    user = client.get("/").context["user"]
    return user.username if user.is_authenticated else None


def dora(groups: list[str]) -> dict:
    return {
        "sub": "0c4f7e0a-dora",
        "preferred_username": "Dora",
        "email": "dora@id.example.org",
        "given_name": "Dora",
        "family_name": "Directory",
        "groups": groups,
    }


def test_the_sign_in_page_has_the_providers_button(client, oidc_on):
    page = client.get(LOGIN, {"next": "/clusters/"}).content.decode()

    assert "Sign in with Example ID" in page
    assert 'href="/accounts/oidc/authenticate/?next=/clusters/"' in page


def test_it_signs_a_user_in_and_makes_their_platter_user(client, oidc_on):
    physics = Group.objects.create(name="physics")
    Quota.objects.create(group=physics, max_cores=8)

    response = sign_in_with_provider(client, oidc_on, dora(["physics", "unmapped"]), "/ssh-keys/")

    assert response.status_code == 302 and response["Location"] == "/ssh-keys/"
    assert signed_in_as(client) == "dora"
    user = get_user_model().objects.get(username="dora")
    assert (user.email, user.first_name, user.last_name) == (
        "dora@id.example.org",
        "Dora",
        "Directory",
    )
    assert not user.has_usable_password() and not user.is_staff
    quota = client.get("/api/v1/quota").json()
    assert [(g["scope"], g["limits"]["max_cores"]) for g in quota["groups"]] == [
        ("group physics", 8)
    ]


def test_groups_follow_the_claim_at_the_next_sign_in(client, oidc_on):
    sign_in_with_provider(client, oidc_on, dora(["physics"]))
    client.post("/accounts/logout/")

    sign_in_with_provider(client, oidc_on, dora(["chemistry", "platter-admins"]))

    user = get_user_model().objects.get(username="dora")
    assert list(user.groups.values_list("name", flat=True)) == ["chem"]
    assert user.is_staff  # platter-admins is the staff group
    assert get_user_model().objects.count() == 1  # the same user, not a second one


def test_a_user_in_no_mapped_group_is_in_no_quota_group(client, oidc_on, settings):
    sign_in_with_provider(client, oidc_on, dora([]))

    quota = client.get("/api/v1/quota").json()
    assert quota["groups"] == []
    assert (
        quota["user"]["limits"]["max_clusters"]
        == (settings.SCHEDULER_DEFAULT_QUOTA["max_clusters"])
    )


def test_groups_only_the_id_token_carries_count_too(client, oidc_on):
    oidc_on.id_token_claims = {"groups": ["chemistry"]}

    userinfo = {claim: value for claim, value in dora([]).items() if claim != "groups"}
    sign_in_with_provider(client, oidc_on, userinfo)

    user = get_user_model().objects.get(username="dora")
    assert list(user.groups.values_list("name", flat=True)) == ["chem"]


def test_an_id_token_from_another_issuer_is_refused(client, oidc_on):
    sign_in_with_provider(client, oidc_on, dora(["physics"]))
    client.post("/accounts/logout/")
    # Another provider's token for the same sub and name (signed with a key the portal
    # trusts, so only the issuer check stands in the way).
    oidc_on.token_issuer = "https://id.elsewhere.example.org"

    response = sign_in_with_provider(client, oidc_on, dora(["physics"]))

    assert response["Location"] == LOGIN
    assert "did not succeed" in client.get(LOGIN).content.decode()
    assert signed_in_as(client) is None
    assert OIDCIdentity.objects.get().issuer == oidc_on.url


def test_userinfo_about_another_sub_is_refused(client, oidc_on):
    oidc_on.id_token_claims = {"sub": "someone-else"}  # the ID token's sub wins over userinfo's

    response = sign_in_with_provider(client, oidc_on, dora(["physics"]))

    assert response["Location"] == LOGIN
    assert signed_in_as(client) is None
    assert not OIDCIdentity.objects.exists()


def test_an_id_token_for_another_client_is_refused(client, oidc_on):
    oidc_on.audience = "some-other-app"

    response = sign_in_with_provider(client, oidc_on, dora(["physics"]))

    assert response.status_code == 302 and response["Location"] == LOGIN
    page = client.get(LOGIN).content.decode()
    assert "Sign-in with Example ID did not succeed." in page
    assert signed_in_as(client) is None
    assert not get_user_model().objects.filter(username="dora").exists()


def test_an_id_token_signed_with_another_key_is_refused(client, oidc_on):
    oidc_on.signing_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    response = sign_in_with_provider(client, oidc_on, dora(["physics"]))

    assert response["Location"] == LOGIN
    assert signed_in_as(client) is None
    assert not get_user_model().objects.filter(username="dora").exists()


def test_a_provider_that_does_not_answer_ends_on_the_sign_in_page(client, oidc_on, settings):
    settings.OIDC_OP_TOKEN_ENDPOINT = "http://127.0.0.1:1/token"  # nothing listens there

    response = sign_in_with_provider(client, oidc_on, dora(["physics"]))

    assert response["Location"] == LOGIN
    assert "did not succeed" in client.get(LOGIN).content.decode()
    assert signed_in_as(client) is None


def test_the_provider_never_takes_over_a_local_account_of_the_same_name(client, oidc_on, alice):
    claims = {**dora(["platter-admins"]), "preferred_username": "alice"}

    response = sign_in_with_provider(client, oidc_on, claims)

    assert response["Location"] == LOGIN
    assert (
        "the user name &#x27;alice&#x27; belongs to another" in client.get(LOGIN).content.decode()
    )
    assert signed_in_as(client) is None
    alice.refresh_from_db()
    assert not alice.is_staff and alice.email == "alice@example.org"
    assert not OIDCIdentity.objects.exists()


def test_claims_without_a_user_name_are_refused(client, oidc_on):
    claims = {**dora([]), "preferred_username": "not a user name!"}

    assert sign_in_with_provider(client, oidc_on, claims)["Location"] == LOGIN
    assert "no valid user name (preferred_username claim)" in client.get(LOGIN).content.decode()
    assert get_user_model().objects.count() == 0


def test_local_accounts_still_sign_in_with_their_own_password(client, oidc_on, bob):
    response = client.post(LOGIN, {"username": "bob", "password": "bob-pass-123"})
    assert response.status_code == 302
    assert signed_in_as(client) == "bob"


# Users are bound to the provider's (issuer, sub), never found by their name claim.


def test_the_first_sign_in_binds_the_user_to_the_issuer_and_sub(client, oidc_on):
    sign_in_with_provider(client, oidc_on, dora(["physics"]))

    identity = OIDCIdentity.objects.get()
    assert (identity.user.username, identity.issuer, identity.subject) == (
        "dora",
        oidc_on.url,
        "0c4f7e0a-dora",
    )


def test_another_sub_with_the_same_name_gets_no_one_elses_account(client, oidc_on):
    sign_in_with_provider(client, oidc_on, dora(["physics"]))
    dora_user = get_user_model().objects.get(username="dora")
    client.post("/accounts/logout/")
    # Someone else at the provider calls themselves Dora too (or took the name Dora left).
    impostor = {**dora(["platter-admins"]), "sub": "9d1e-someone-else", "email": "x@evil.example"}

    response = sign_in_with_provider(client, oidc_on, impostor)

    assert response["Location"] == LOGIN
    page = client.get(LOGIN).content.decode()
    assert "the user name &#x27;dora&#x27; belongs to another Platter account" in page
    assert signed_in_as(client) is None
    dora_user.refresh_from_db()
    assert dora_user.email == "dora@id.example.org" and not dora_user.is_staff
    assert list(OIDCIdentity.objects.values_list("subject", flat=True)) == ["0c4f7e0a-dora"]
    assert get_user_model().objects.count() == 1


def test_a_renamed_user_keeps_their_account(client, oidc_on):
    sign_in_with_provider(client, oidc_on, dora(["physics"]))
    dora_user = get_user_model().objects.get(username="dora")
    client.post("/accounts/logout/")

    renamed = {**dora(["physics"]), "preferred_username": "dora.married", "family_name": "Wed"}
    response = sign_in_with_provider(client, oidc_on, renamed, "/ssh-keys/")

    assert response["Location"] == "/ssh-keys/"
    assert signed_in_as(client) == "dora"  # the same user, its name unchanged
    dora_user.refresh_from_db()
    assert dora_user.last_name == "Wed"
    assert get_user_model().objects.count() == 1


def test_a_name_freed_by_a_rename_is_not_handed_to_a_newcomer(client, oidc_on):
    sign_in_with_provider(client, oidc_on, {**dora([]), "preferred_username": "dora.new"})
    client.post("/accounts/logout/")
    # Dora renamed herself at the provider; a newcomer now has her old name and a sub of
    # their own: they get a user of their own, not Dora's.
    sign_in_with_provider(client, oidc_on, {**dora([]), "sub": "newcomer", "email": "n@x.org"})

    assert signed_in_as(client) == "dora"
    newcomer = OIDCIdentity.objects.get(subject="newcomer").user
    original = OIDCIdentity.objects.get(subject="0c4f7e0a-dora").user
    assert newcomer != original
    assert (original.username, original.email) == ("dora.new", "dora@id.example.org")


def test_a_user_outside_the_required_group_is_refused(client, oidc_on, settings):
    settings.OIDC_REQUIRE_GROUP = "platter-users"

    response = sign_in_with_provider(client, oidc_on, dora(["physics"]))

    assert response["Location"] == LOGIN
    page = client.get(LOGIN).content.decode()
    assert "not in the group &#x27;platter-users&#x27; that may use Platter" in page
    assert signed_in_as(client) is None
    assert not get_user_model().objects.exists()


def test_members_of_the_required_group_sign_in_and_leaving_it_locks_them_out(
    client, oidc_on, settings
):
    settings.OIDC_REQUIRE_GROUP = "platter-users"
    sign_in_with_provider(client, oidc_on, dora(["physics", "platter-users"]))
    assert signed_in_as(client) == "dora"
    client.post("/accounts/logout/")

    response = sign_in_with_provider(client, oidc_on, dora(["physics"]))

    assert response["Location"] == LOGIN
    assert signed_in_as(client) is None


def test_the_required_group_comes_from_the_configured_claim(client, oidc_on, settings):
    settings.OIDC_REQUIRE_GROUP = "platter-users"
    settings.OIDC_GROUPS_CLAIM = "roles"

    sign_in_with_provider(client, oidc_on, {**dora(["physics"]), "roles": ["platter-users"]})

    assert signed_in_as(client) == "dora"
