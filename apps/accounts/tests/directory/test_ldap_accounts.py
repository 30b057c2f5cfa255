"""An LDAP sign-in lands only on an account the directory made (or an admin linked to it),
against the real slapd and the real sign-in page: whoever holds a directory name equal to a
local account's or an OpenID Connect person's is refused, saying why, and that account is
left as it was."""

import html
import importlib

from django.apps import apps
from django.contrib.auth import get_user_model
from django.utils import timezone

from apps.accounts.models import LDAPAccount
from apps.accounts.oidc import create_bound_user

from .test_ldap_signin import sign_in, signed_in_as

ISSUER = "https://id.example.org"


def shown(response) -> str:
    return html.unescape(response.content.decode())


def test_the_first_sign_in_makes_the_account_the_directorys(client, ldap_on):
    assert sign_in(client, "dora", "dora-dir-pass").status_code == 302

    assert LDAPAccount.objects.filter(user__username="dora").exists()
    client.post("/accounts/logout/")
    assert sign_in(client, "dora", "dora-dir-pass").status_code == 302  # and again
    assert signed_in_as(client) == "dora"


def test_the_directory_never_lands_on_an_account_an_openid_connect_sign_in_made(
    client, ldap_on, settings
):
    # Someone at the provider signed in first and got the name "dora" (no password of its
    # own, as every account a provider makes): the directory's dora is not that person.
    settings.OIDC_PROVIDER_NAME = "Example ID"
    theirs = create_bound_user(ISSUER, "sub-of-another-dora", "dora")

    response = sign_in(client, "dora", "dora-dir-pass")

    assert response.status_code == 200
    assert signed_in_as(client) is None
    assert (
        "Sign-in with the directory did not succeed: the user name 'dora' belongs to a Platter "
        "account made by a sign-in with Example ID, not by the directory" in shown(response)
    )
    theirs.refresh_from_db()
    assert (theirs.first_name, theirs.email) == ("", "")  # nothing of the directory's copied
    assert not theirs.groups.exists()
    assert not LDAPAccount.objects.filter(user=theirs).exists()


def test_the_directory_never_lands_on_a_local_account_without_a_password(client, ldap_on):
    # An admin made "eve" by hand with password sign-in disabled (for a later link, say).
    eve = get_user_model().objects.create_user("eve")
    assert not eve.has_usable_password()

    response = sign_in(client, "eve", "eve-dir-pass")

    assert signed_in_as(client) is None
    assert "account made on this portal (a local account)" in shown(response)
    assert not eve.groups.exists() and not LDAPAccount.objects.filter(user=eve).exists()


def test_a_wrong_directory_password_learns_nothing_of_whose_the_name_is(client, ldap_on):
    create_bound_user(ISSUER, "sub-of-another-dora", "dora")

    response = sign_in(client, "dora", "not-her-password")

    assert "belongs to a Platter account" not in shown(response)
    assert "Please enter a correct username and password" in shown(response)


def test_an_admin_links_a_local_account_to_the_directory(client, ldap_on, alice):
    LDAPAccount.objects.create(user=alice)  # Admin > LDAP accounts > Add

    assert sign_in(client, "alice", "alice-dir-pass").status_code == 302
    assert signed_in_as(client) == "alice"


def test_users_the_directory_made_before_it_was_recorded_keep_signing_in(client, ldap_on):
    User = get_user_model()
    # gina signed in with the directory before: no usable password, a last sign-in, no
    # provider identity. eve was made by hand and never signed in; dora by a provider.
    gina = User.objects.create_user("gina", last_login=timezone.now())
    User.objects.create_user("eve")
    dora = create_bound_user(ISSUER, "sub-of-another-dora", "dora")
    User.objects.filter(id=dora.id).update(last_login=timezone.now())
    LDAPAccount.objects.all().delete()

    migration = importlib.import_module("apps.accounts.migrations.0004_ldap_account")
    migration.record_ldap_accounts(apps, None)

    assert list(LDAPAccount.objects.values_list("user__username", flat=True)) == ["gina"]
    assert sign_in(client, "gina", "gina-dir-pass").status_code == 302
    assert LDAPAccount.objects.get(user__username="gina").user_id == gina.id
    client.post("/accounts/logout/")
    assert sign_in(client, "eve", "eve-dir-pass").status_code == 200
    assert sign_in(client, "dora", "dora-dir-pass").status_code == 200
