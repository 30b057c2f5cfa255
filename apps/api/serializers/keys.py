"""The caller's public SSH keys."""

from rest_framework import serializers

from apps.accounts.models import SSHKey


class SSHKeySerializer(serializers.ModelSerializer):
    type = serializers.CharField(source="key_type", read_only=True)

    class Meta:
        model = SSHKey
        fields = ["id", "name", "type", "fingerprint", "public_key", "created"]


class SSHKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        max_length=100, required=False, allow_blank=True, help_text="Empty: the key's comment"
    )
    public_key = serializers.CharField(
        help_text='One OpenSSH public key line, e.g. "ssh-ed25519 AAAA… me@laptop"',
        trim_whitespace=True,
    )
