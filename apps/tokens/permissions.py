from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from .authentication import token_of


class TokenScope(BasePermission):
    """Read-only tokens may only read; sessions and full tokens are not limited here."""

    message = "this token is read-only"
    code = "read_only_token"

    def has_permission(self, request: Request, view) -> bool:
        token = token_of(request)
        return token is None or not token.read_only or request.method in SAFE_METHODS
