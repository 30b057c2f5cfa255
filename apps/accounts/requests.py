"""The signed-in user of a request whose view already requires one (login_required, DRF's
IsAuthenticated): typed as the User it is, rather than "User or AnonymousUser"."""

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request


def signed_in_user(request: HttpRequest | Request) -> User:
    user = request.user
    if not isinstance(user, User):  # the view's own check makes this unreachable
        raise PermissionDenied("sign in first")
    return user
