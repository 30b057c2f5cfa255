from django.db.models import Model, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from apps.accounts.models import Quota
from apps.accounts.requests import signed_in_user
from apps.clusters.quotas import default_limits, group_usage, user_usage
from apps.tokens.authentication import token_of
from apps.tokens.models import ApiToken
from apps.tokens.services import TokenInvalid, issue_token, revoke

from ..serializers.me import (
    IssuedTokenSerializer,
    MyQuotaSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)


class QuotaView(APIView):
    """Your limits (null: unlimited) and what your live clusters use, per limit; the same
    for every group quota you share."""

    @extend_schema(responses=MyQuotaSerializer)
    def get(self, request: Request) -> Response:
        user = signed_in_user(request)
        own = Quota.objects.filter(user=user).first()
        groups = Quota.objects.filter(group__user=user).select_related("group").order_by("id")
        body = {
            "user": {
                "scope": f"user {user.username}",
                "limits": own.limits() if own else default_limits(),
                "used": user_usage(user.id),
            },
            "groups": [
                {
                    "scope": f"group {q.group.name}",
                    "limits": q.limits(),
                    "used": group_usage(q.group.id),
                }
                for q in groups
                if q.group is not None  # the query asked for group rows
            ],
        }
        return Response(MyQuotaSerializer(body).data)


class CallersRowsViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, GenericViewSet
):
    """List, read and delete the caller's own rows of `model` (a `user` foreign key); anyone
    else's answer 404."""

    model: type[Model]
    filter_backends = []

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation, no user
            return self.model._default_manager.none()
        return self.model._default_manager.filter(user=signed_in_user(self.request))


class TokenViewSet(CallersRowsViewSet):
    """Your personal API tokens. Creating one answers its secret once; DELETE revokes."""

    model = ApiToken
    serializer_class = TokenSerializer

    @extend_schema(request=TokenCreateSerializer, responses={201: IssuedTokenSerializer})
    def create(self, request: Request) -> Response:
        asked = TokenCreateSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        user = signed_in_user(request)
        # A token-authenticated request makes no token that outlives the one it uses.
        made_with = token_of(request)
        try:
            issued = issue_token(user, **asked.validated_data, actor=user, made_with=made_with)
        except TokenInvalid as refused:  # revoked meanwhile (another process's cache held it)
            raise AuthenticationFailed(str(refused)) from None
        data = {**TokenSerializer(issued.token).data, "token": issued.secret}
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        revoke(instance.id, actor=self.request.user)
