from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.accounts import ssh
from apps.accounts.models import SSHKey

from ..serializers.keys import SSHKeyCreateSerializer, SSHKeySerializer


class SSHKeyViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, GenericViewSet
):
    """Your public SSH keys: they open your clusters' sshd (see each cluster's ssh login). A
    change reaches your running clusters within seconds."""

    serializer_class = SSHKeySerializer
    filter_backends = []

    def get_queryset(self) -> QuerySet[SSHKey]:
        if getattr(self, "swagger_fake_view", False):  # schema generation, no user
            return SSHKey.objects.none()
        return SSHKey.objects.filter(user=self.request.user)

    @extend_schema(request=SSHKeyCreateSerializer, responses={201: SSHKeySerializer})
    def create(self, request: Request) -> Response:
        asked = SSHKeyCreateSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        data = asked.validated_data
        try:
            key = ssh.add_key(request.user, data["public_key"], data.get("name", ""))
        except ssh.InvalidKey as error:
            raise ValidationError({"public_key": [str(error)]}) from None
        return Response(SSHKeySerializer(key).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: SSHKey) -> None:
        ssh.delete_key(self.request.user, instance.id)
