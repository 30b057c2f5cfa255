"""The caller's own things: quota and personal tokens."""

from rest_framework import serializers

from apps.tokens.models import ApiToken

from .inventory import LimitsSerializer


class QuotaScopeSerializer(serializers.Serializer):
    scope = serializers.CharField(help_text='"user alice" or "group lab"')
    limits = LimitsSerializer()
    used = LimitsSerializer()


class MyQuotaSerializer(serializers.Serializer):
    user = QuotaScopeSerializer()
    groups = QuotaScopeSerializer(many=True)


class TokenSerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "read_only",
            "state",
            "created",
            "last_used",
            "expires_at",
            "revoked_at",
        ]

    def get_state(self, token: ApiToken) -> str:
        return "revoked" if token.is_revoked else "expired" if token.is_expired else "active"


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    read_only = serializers.BooleanField(default=False)  # type: ignore[assignment]  # the API's key
    expires_in_days = serializers.FloatField(
        required=False, allow_null=True, min_value=0.001, max_value=3650
    )


class IssuedTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The secret; shown only in this answer")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]
