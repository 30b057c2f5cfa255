"""What a sign-in through the site's directory (LDAP: apps.accounts.ldap_backend, OpenID
Connect: apps.accounts.oidc) does to the Platter user: its groups, and so its quota groups,
follow the directory's at every sign-in, and so do its staff flags when a staff group is
configured.

Mapped groups are ordinary Django groups; an admin gives one a quota (Admin > Quotas) to cap
what its members hold together. Only groups named in the mapping are managed here: a group an
admin adds a user to by hand stays. A user in no mapped group is in no quota group, and gets
the default quota like any local user. The mappings come from the environment
(portal/settings/directory.py).
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractUser, Group
from django.db import transaction

from .models import LDAPAccount, OIDCIdentity

log = logging.getLogger(__name__)


class ForeignAccount(Exception):
    """The LDAP directory's user name belongs to an account the directory did not make (a
    local one, or one an OpenID Connect sign-in made): the directory never takes it over.
    The text says whose it is, for the person signing in."""


@dataclass(frozen=True)
class GroupMapping:
    """Directory groups (LDAP group DNs, or an OpenID Connect claim's values) to Platter groups,
    and the directory groups whose members are staff or superusers. Keys are compared after
    `normalize` (LDAP: DNs ignore case and spaces between their parts)."""

    groups: dict[str, str]
    staff: frozenset[str] = frozenset()
    superuser: frozenset[str] = frozenset()
    normalize: Callable[[str], str] = str

    @classmethod
    def from_settings(cls, setting: dict, normalize: Callable[[str], str] = str) -> "GroupMapping":
        """From the plain dict the settings hold: {"groups": {...}, "staff": [...],
        "superuser": [...]}."""
        return cls(
            groups={normalize(key): name for key, name in setting.get("groups", {}).items()},
            staff=frozenset(normalize(dn) for dn in setting.get("staff", ())),
            superuser=frozenset(normalize(dn) for dn in setting.get("superuser", ())),
            normalize=normalize,
        )

    def platter_groups(self, directory_groups: Iterable[str]) -> set[str]:
        """The Platter groups the user belongs in, given the user's directory groups."""
        mine = {self.normalize(group) for group in directory_groups}
        return {self.groups[group] for group in mine if group in self.groups}

    def flags(self, directory_groups: Iterable[str]) -> dict[str, bool]:
        """is_staff / is_superuser as the directory says, only for the flags that have groups
        configured (the others stay as an admin set them)."""
        mine = {self.normalize(group) for group in directory_groups}
        flags = {}
        if self.superuser:
            flags["is_superuser"] = bool(mine & self.superuser)
        if self.staff or self.superuser:
            flags["is_staff"] = bool(mine & (self.staff | self.superuser))
        return flags


def refuse_foreign_account(user: AbstractUser) -> None:
    """An LDAP sign-in may only land on a new user or one with an LDAPAccount (the directory
    made it, or an admin linked it): otherwise whoever holds a directory name equal to a local
    account's (an admin's, say) or to an OpenID Connect person's would sign in as them."""
    if user.pk is None or LDAPAccount.objects.filter(user_id=user.pk).exists():
        return
    if OIDCIdentity.objects.filter(user_id=user.pk).exists():
        made = f"by a sign-in with {settings.OIDC_PROVIDER_NAME or 'OpenID Connect'}"
    else:
        made = "on this portal (a local account)"
    raise ForeignAccount(
        f"the user name {user.get_username()!r} belongs to a Platter account made {made}, not "
        "by the directory; ask the portal's admins to link your directory sign-in to it or to "
        "rename it"
    )


def record_ldap_account(user: AbstractUser) -> None:
    """The directory signed in as this user: from now on it is the directory's."""
    LDAPAccount.objects.get_or_create(user_id=user.pk)


@transaction.atomic
def sync_user(user: AbstractUser, directory_groups: Iterable[str], mapping: GroupMapping) -> None:
    """Make the user's mapped groups and staff flags what the directory says now. Groups named
    in the mapping are created when first needed."""
    directory_groups = list(directory_groups)
    wanted = mapping.platter_groups(directory_groups)
    managed = set(mapping.groups.values())
    current = set(user.groups.filter(name__in=managed).values_list("name", flat=True))
    joined, left = sorted(wanted - current), sorted(current - wanted)
    if left:
        user.groups.remove(*Group.objects.filter(name__in=left))
    if joined:
        user.groups.add(*(Group.objects.get_or_create(name=name)[0] for name in joined))
    flags = {
        name: value
        for name, value in mapping.flags(directory_groups).items()
        if getattr(user, name) != value
    }
    if flags:
        for name, value in flags.items():
            setattr(user, name, value)
        user.save(update_fields=list(flags))
    if joined or left or flags:
        log.info(
            "directory sign-in of %s: joined %s, left %s, flags %s",
            user.get_username(),
            joined,
            left,
            flags,
        )
