from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts import ssh
from apps.accounts.models import SSHKey

from ..serializers.keys import SSHKeyCreateSerializer, SSHKeySerializer
from .me import CallersRowsViewSet


class SSHKeyViewSet(CallersRowsViewSet):
    """Your public SSH keys: they open your clusters' sshd (see each cluster's ssh login). A
    change reaches your running clusters within seconds."""

    model = SSHKey
    serializer_class = SSHKeySerializer

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
