"""The sign-in page's part for the site's directory: {% directory_sign_in %}."""

from django import template
from django.conf import settings

register = template.Library()


@register.inclusion_tag("accounts/directory_sign_in.html", takes_context=True)
def directory_sign_in(context: template.Context) -> dict:
    return {
        "ldap": settings.LDAP_ENABLED,
        "oidc_name": settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else "",
        "next": context.get("next") or "",
    }
