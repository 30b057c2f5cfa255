"""Sign-in with the site's LDAP directory (django-auth-ldap; settings from PLATTER_LDAP_*, see
portal/settings/directory.py). A directory user gets a Platter user at the first sign-in, and
its groups and staff flags follow the directory at every sign-in (apps.accounts.directory)."""

import logging
from typing import Any

import ldap.dn
from django.conf import settings
from django_auth_ldap.backend import LDAPBackend

from .directory import GroupMapping, LocalAccount, refuse_local_account, sync_user

log = logging.getLogger(__name__)


def normalize_dn(dn: str) -> str:
    """DNs compare without case and without spaces between their parts."""
    return ldap.dn.dn2str(ldap.dn.str2dn(dn)).lower()


class DirectoryLDAPBackend(LDAPBackend):
    def get_or_build_user(self, username: str, ldap_user: Any) -> tuple[Any, bool]:
        user, built = super().get_or_build_user(username, ldap_user)
        try:
            refuse_local_account(user)
        except LocalAccount as refusal:
            log.warning("LDAP sign-in refused: %s", refusal)
            raise ldap_user.AuthenticationFailed(str(refusal)) from None
        return user, built

    def authenticate_ldap_user(self, ldap_user: Any, password: str) -> Any:
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None:
            mapping = GroupMapping.from_settings(settings.LDAP_GROUP_MAPPING, normalize_dn)
            # Without a group search the directory's groups are unknown: none is mapped.
            groups = ldap_user.group_dns if self.settings.GROUP_SEARCH is not None else ()
            sync_user(user, groups, mapping)
        return user
