"""Sign-in with the site's LDAP directory (django-auth-ldap; settings from PLATTER_LDAP_*, see
portal/settings/directory.py). A directory user gets a Platter user at the first sign-in, and
its groups and staff flags follow the directory at every sign-in (apps.accounts.directory). The
directory signs in only as users it made (LDAPAccount) or an admin linked to it: never as a
local account, nor as one an OpenID Connect sign-in made, that bears the same name."""

import logging
from typing import Any

import ldap.dn
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest
from django_auth_ldap.backend import LDAPBackend

from .directory import (
    ForeignAccount,
    GroupMapping,
    record_ldap_account,
    refuse_foreign_account,
    sync_user,
)

log = logging.getLogger(__name__)


def normalize_dn(dn: str) -> str:
    """DNs compare without case and without spaces between their parts."""
    return ldap.dn.dn2str(ldap.dn.str2dn(dn)).lower()


class DirectoryLDAPBackend(LDAPBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        try:
            return super().authenticate(request, username, password, **kwargs)
        except ForeignAccount as refusal:
            # Only someone who gave the directory's password for the name gets this far, so
            # saying whose the name is tells a stranger nothing.
            log.warning("LDAP sign-in refused: %s", refusal)
            if request is not None:
                messages.error(request, f"Sign-in with the directory did not succeed: {refusal}.")
            return None

    def get_or_build_user(self, username: str, ldap_user: Any) -> tuple[Any, bool]:
        user, built = super().get_or_build_user(username, ldap_user)
        refuse_foreign_account(user)  # raised through the library to authenticate() above
        return user, built

    def authenticate_ldap_user(self, ldap_user: Any, password: str) -> Any:
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None:
            record_ldap_account(user)
            mapping = GroupMapping.from_settings(settings.LDAP_GROUP_MAPPING, normalize_dn)
            # Without a group search the directory's groups are unknown: none is mapped.
            groups = ldap_user.group_dns if self.settings.GROUP_SEARCH is not None else ()
            sync_user(user, groups, mapping)
        return user
