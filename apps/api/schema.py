"""OpenAPI: every operation also documents the shared error body for the statuses any API
call may answer, so clients (and schemathesis) know what a 4xx looks like."""

from typing import Literal

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from apps.accounts.models import LIMIT_FIELDS

SAFE_ERRORS = ("400", "401", "403", "404", "429")
UNSAFE_ERRORS = (*SAFE_ERRORS, "409", "415")


class QuotaRejectionSerializer(serializers.Serializer):
    limit = serializers.ChoiceField(choices=LIMIT_FIELDS)
    scope = serializers.CharField()
    asked = serializers.IntegerField()
    used = serializers.IntegerField()
    maximum = serializers.IntegerField()


class ErrorSerializer(serializers.Serializer):
    status = serializers.IntegerField()
    error = serializers.CharField(help_text="machine-readable code, e.g. quota_exceeded")
    message = serializers.CharField()
    fields = serializers.DictField(  # type: ignore[assignment]  # the API's key
        child=serializers.CharField(), required=False, help_text="bad field -> problem"
    )
    quota = QuotaRejectionSerializer(required=False)
    retry_after = serializers.IntegerField(required=False, help_text="seconds (429 only)")


class PlatterAutoSchema(AutoSchema):
    def get_operation_id(self) -> str:
        # The same cluster view also serves /clusters/<user>/<product>/<version>/<id>.
        operation_id = super().get_operation_id()
        return f"{operation_id}_by_path" if "{username}" in self.path else operation_id

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        codes = SAFE_ERRORS if self.method in ("GET", "HEAD", "OPTIONS") else UNSAFE_ERRORS
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code)
        return responses
