"""The mapping from directory groups to Platter groups and staff flags, on its own."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from apps.accounts.directory import GroupMapping, sync_user
from apps.accounts.ldap_backend import normalize_dn

ADMINS = "cn=Admins,ou=groups,dc=example,dc=org"


def directory_user(username: str = "dora"):
    return get_user_model().objects.create_user(username)  # no password: the directory's


def test_dns_compare_without_case_or_spaces():
    mapping = GroupMapping.from_settings(
        {"groups": {"CN=Physics, OU=Groups,DC=example,DC=org": "physics"}}, normalize_dn
    )
    assert mapping.platter_groups(["cn=physics,ou=groups,dc=example,dc=org"]) == {"physics"}


def test_the_superuser_group_makes_staff_superusers_and_leaving_it_undoes_that(db):
    user = directory_user()
    mapping = GroupMapping.from_settings({"superuser": [ADMINS]}, normalize_dn)

    sync_user(user, [ADMINS.lower()], mapping)
    user.refresh_from_db()
    assert user.is_superuser and user.is_staff

    sync_user(user, [], mapping)
    user.refresh_from_db()
    assert not user.is_superuser and not user.is_staff


def test_without_staff_groups_the_flags_stay_as_an_admin_set_them(db):
    user = directory_user()
    user.is_staff = True
    user.save()

    sync_user(user, ["anything"], GroupMapping.from_settings({"groups": {"anything": "a"}}))

    user.refresh_from_db()
    assert user.is_staff


def test_only_mapped_groups_are_managed_and_created_when_first_needed(db):
    user = directory_user()
    user.groups.add(Group.objects.create(name="beta-testers"))
    mapping = GroupMapping.from_settings({"groups": {"physics": "physics", "chem": "chem"}})

    sync_user(user, ["physics", "unmapped"], mapping)
    assert sorted(user.groups.values_list("name", flat=True)) == ["beta-testers", "physics"]
    assert not Group.objects.filter(name__in=["chem", "unmapped"]).exists()

    sync_user(user, [], mapping)
    assert list(user.groups.values_list("name", flat=True)) == ["beta-testers"]
