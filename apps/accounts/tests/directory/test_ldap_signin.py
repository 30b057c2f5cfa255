"""Sign-in with the LDAP directory, against a real slapd (conftest.py), through the real sign-in
page: a directory user gets a Platter user at the first sign-in, their directory groups become
quota groups at every sign-in, and wrong passwords are refused and counted by the lock-out."""

from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from apps.accounts.models import Quota

from .conftest import GROUPS, PEOPLE, configure, ldap_env

LOGIN = "/accounts/login/"


def sign_in(client, username: str, password: str):
    return client.post(
        LOGIN, {"username": username, "password": password, "next": "/"}, REMOTE_ADDR="192.0.2.10"
    )


def signed_in_as(client) -> str | None:
    user = client.get("/").context["user"]
    return user.username if user.is_authenticated else None


def my_quota_scopes(client) -> list[str]:
    body = client.get("/api/v1/quota").json()
    return [body["user"]["scope"], *(group["scope"] for group in body["groups"])]


def test_the_sign_in_page_says_to_use_the_directory_password(client, ldap_on):
    assert b"Use your directory user name and password" in client.get(LOGIN).content


def test_it_signs_a_directory_user_in_and_makes_their_platter_user(client, ldap_on):
    response = sign_in(client, "dora", "dora-dir-pass")

    assert response.status_code == 302, response.content
    assert signed_in_as(client) == "dora"
    dora = get_user_model().objects.get(username="dora")
    assert (dora.first_name, dora.last_name, dora.email) == (
        "Dora",
        "Directory",
        "dora@directory.example.org",
    )
    assert not dora.has_usable_password()  # the directory holds the password, never Platter
    assert not dora.is_staff
    # physics is mapped; "unmapped" is not, so it makes no Platter group.
    assert list(dora.groups.values_list("name", flat=True)) == ["physics"]
    assert not Group.objects.filter(name="unmapped").exists()


def test_the_mapped_group_is_a_quota_group(client, ldap_on):
    physics = Group.objects.create(name="physics")
    Quota.objects.create(group=physics, max_clusters=2, max_cores=16)

    sign_in(client, "dora", "dora-dir-pass")

    body = client.get("/api/v1/quota").json()
    assert body["user"]["scope"] == "user dora"
    assert [(g["scope"], g["limits"]["max_cores"]) for g in body["groups"]] == [
        ("group physics", 16)
    ]


def test_a_user_in_no_mapped_group_gets_the_default_quota_as_a_local_user_does(
    client, ldap_on, alice, settings
):
    sign_in(client, "frank", "frank-dir-pass")  # in platter-admins only: staff, no quota group
    body = client.get("/api/v1/quota").json()

    assert body["groups"] == []
    assert body["user"]["limits"]["max_cores"] == settings.SCHEDULER_DEFAULT_QUOTA["max_cores"]


def test_the_staff_group_makes_staff(client, ldap_on):
    sign_in(client, "frank", "frank-dir-pass")

    frank = get_user_model().objects.get(username="frank")
    assert frank.is_staff
    assert not frank.is_superuser  # no superuser group is configured


def test_group_changes_in_the_directory_reach_platter_at_the_next_sign_in(client, ldap_on):
    sign_in(client, "gina", "gina-dir-pass")
    assert my_quota_scopes(client) == ["user gina"]  # no quota on physics yet
    gina = get_user_model().objects.get(username="gina")
    assert list(gina.groups.values_list("name", flat=True)) == ["physics"]
    manual = Group.objects.create(name="beta-testers")  # an admin's, not the directory's
    gina.groups.add(manual)
    Quota.objects.create(group=Group.objects.get_or_create(name="chem")[0], max_clusters=1)
    client.post("/accounts/logout/")

    # The directory moves gina from physics to chemistry.
    ldap_on.modify(
        f"dn: cn=physics,{GROUPS}\nchangetype: modify\ndelete: member\n"
        f"member: uid=gina,{PEOPLE}\n\n"
        f"dn: cn=chemistry,{GROUPS}\nchangetype: modify\nadd: member\n"
        f"member: uid=gina,{PEOPLE}\n"
    )
    try:
        sign_in(client, "gina", "gina-dir-pass")

        assert sorted(gina.groups.values_list("name", flat=True)) == ["beta-testers", "chem"]
        assert my_quota_scopes(client) == ["user gina", "group chem"]
    finally:
        ldap_on.modify(
            f"dn: cn=chemistry,{GROUPS}\nchangetype: modify\ndelete: member\n"
            f"member: uid=gina,{PEOPLE}\n\n"
            f"dn: cn=physics,{GROUPS}\nchangetype: modify\nadd: member\n"
            f"member: uid=gina,{PEOPLE}\n"
        )


def test_a_wrong_directory_password_is_refused_and_counted_by_the_lock_out(client, ldap_on):
    response = sign_in(client, "dora", "not-her-password")

    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert signed_in_as(client) is None
    attempt = AccessAttempt.objects.get(username="dora")
    assert attempt.failures_since_start == 1


def test_too_many_wrong_directory_passwords_lock_the_user_out(client, ldap_on, settings):
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        response = sign_in(client, "eve", f"wrong-{attempt}")
    assert response.status_code == 429
    assert sign_in(client, "eve", "eve-dir-pass").status_code == 429  # even the right one
    assert signed_in_as(client) is None


def test_an_unknown_user_is_refused(client, ldap_on):
    assert sign_in(client, "nobody", "whatever-pass").status_code == 200
    assert not get_user_model().objects.filter(username="nobody").exists()


def test_local_accounts_still_sign_in_with_their_own_password(client, ldap_on, bob):
    assert sign_in(client, "bob", "bob-pass-123").status_code == 302
    assert signed_in_as(client) == "bob"


def test_the_directory_never_takes_over_a_local_account_of_the_same_name(client, ldap_on, alice):
    # The directory has an "alice" too, with another password: she is not our alice.
    assert sign_in(client, "alice", "alice-dir-pass").status_code == 200
    assert signed_in_as(client) is None
    alice.refresh_from_db()
    assert alice.first_name == "" and alice.check_password("alice-pass-123")
    # Our alice still signs in with her own password.
    assert sign_in(client, "alice", "alice-pass-123").status_code == 302


def test_an_unreachable_directory_refuses_the_sign_in_without_an_error_page(
    client, db, settings, monkeypatch, slapd
):
    configure(
        settings,
        monkeypatch,
        {
            **ldap_env(slapd),
            "PLATTER_LDAP_SERVER_URI": "ldap://127.0.0.1:1/",
            "PLATTER_LDAP_TIMEOUT": "2",
        },
    )
    assert sign_in(client, "dora", "dora-dir-pass").status_code == 200
    assert signed_in_as(client) is None


def test_start_tls_signs_in_when_the_directory_certificate_is_trusted(
    client, db, settings, monkeypatch, slapd
):
    env = {
        **ldap_env(slapd),
        "PLATTER_LDAP_START_TLS": "1",
        "PLATTER_LDAP_CA_FILE": str(slapd.ca_file),
    }
    configure(settings, monkeypatch, env)

    assert sign_in(client, "dora", "dora-dir-pass").status_code == 302
    assert signed_in_as(client) == "dora"


def test_start_tls_refuses_a_directory_certificate_it_cannot_check(
    client, db, settings, monkeypatch, slapd
):
    # No CA file: the system's CAs do not know the test directory's CA.
    configure(settings, monkeypatch, {**ldap_env(slapd), "PLATTER_LDAP_START_TLS": "1"})

    assert sign_in(client, "dora", "dora-dir-pass").status_code == 200
    assert signed_in_as(client) is None
