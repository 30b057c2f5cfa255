"""Admin-only views of the physical pool and of users' quotas."""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.accounts.models import LIMIT_FIELDS, Quota
from apps.clusters.quotas import DISK_KINDS, usage_of
from apps.inventory.models import Disk, Node
from apps.nodes.pki import tls_status


class DiskCountSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    free = serializers.IntegerField()


class CredentialsSerializer(serializers.Serializer):
    """Whether the node's credentials are in place and until when; never the files' path or
    contents (tcp:// keys stay in the portal's files, ssh:// in the ssh client's config)."""

    transport = serializers.CharField()
    files_present = serializers.BooleanField(allow_null=True)
    missing = serializers.ListField(child=serializers.CharField())
    expires = serializers.DateTimeField(allow_null=True)


class NodeSerializer(serializers.ModelSerializer):
    cores_free = serializers.SerializerMethodField()
    memory_free_mb = serializers.SerializerMethodField()
    disks = serializers.SerializerMethodField()
    credentials = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = [
            "id",
            "name",
            "state",
            "endpoint",
            "cores",
            "cores_free",
            "memory_mb",
            "memory_free_mb",
            "disks",
            "labels",
            "last_seen",
            "failed_checks",
            "credentials",
        ]

    def get_cores_free(self, node: Node) -> int:
        return node.cores - node.used_cores  # type: ignore[attr-defined]  # the view's queryset adds it

    def get_memory_free_mb(self, node: Node) -> int:
        return node.memory_mb - node.used_memory  # type: ignore[attr-defined]  # the view's queryset adds it

    @extend_schema_field(CredentialsSerializer)
    def get_credentials(self, node: Node) -> dict:
        facts: dict[str, Any] = {
            "transport": node.transport,
            "files_present": None,
            "missing": [],
            "expires": None,
        }
        if node.transport == "tcp":
            status = tls_status(node.tls_dir)
            facts |= {
                "files_present": status.complete,
                "missing": status.missing,
                "expires": status.expires,
            }
        return CredentialsSerializer(facts).data

    @extend_schema_field(serializers.DictField(child=DiskCountSerializer()))
    def get_disks(self, node: Node) -> dict:
        """Per kind: all disks and the available ones (not held, failed or retired)."""
        return {
            kind: {"total": getattr(node, f"{kind}_total"), "free": getattr(node, f"{kind}_free")}
            for kind in DISK_KINDS
            if getattr(node, f"{kind}_total")
        }


class HolderSerializer(serializers.Serializer):
    cluster = serializers.IntegerField()
    cluster_name = serializers.CharField()
    owner = serializers.CharField()
    instance = serializers.CharField()


class DiskSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name")
    holder = serializers.SerializerMethodField()
    keeps_data_of = serializers.SerializerMethodField()

    class Meta:
        model = Disk
        fields = [
            "id",
            "node",
            "mount_path",
            "device",
            "kind",
            "capacity_bytes",
            "state",
            "holder",
            "keeps_data_of",
        ]

    @staticmethod
    def _describe(allocations: list) -> dict | None:
        if not allocations:
            return None
        instance = allocations[0].instance
        return {
            "cluster": instance.cluster_id,
            "cluster_name": instance.cluster.name,
            "owner": instance.cluster.owner.username,
            "instance": str(instance),
        }

    @extend_schema_field(HolderSerializer(allow_null=True))
    def get_holder(self, disk: Disk) -> dict | None:
        return self._describe(disk.active_allocations)  # type: ignore[attr-defined]  # the view's queryset adds it

    @extend_schema_field(HolderSerializer(allow_null=True))
    def get_keeps_data_of(self, disk: Disk) -> dict | None:
        return self._describe(disk.kept_allocations)  # type: ignore[attr-defined]  # the view's queryset adds it


# Limit name -> value (null: unlimited), one field per limit of apps.accounts.
LimitsSerializer = type(
    "LimitsSerializer",
    (serializers.Serializer,),
    {name: serializers.IntegerField(allow_null=True) for name in LIMIT_FIELDS},
)


class NameField(serializers.SlugRelatedField):
    """A row by its name; a name with a NUL byte is refused before it reaches the database,
    which cannot compare it (DRF's field lets that through as a server error)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value="(with a NUL byte)")
        return super().to_internal_value(data)


class QuotaSerializer(serializers.ModelSerializer):
    user = NameField(
        slug_field="username",
        queryset=get_user_model().objects.all(),
        allow_null=True,
        required=False,
    )
    group = NameField(
        slug_field="name", queryset=Group.objects.all(), allow_null=True, required=False
    )
    used = serializers.SerializerMethodField()

    class Meta:
        model = Quota
        fields = ["id", "user", "group", *LIMIT_FIELDS, "used"]

    @extend_schema_field(LimitsSerializer)
    def get_used(self, quota: Quota) -> dict:
        # The database's sums are decimals: integers here.
        return LimitsSerializer(usage_of(quota)).data

    def validate(self, attrs: dict) -> dict:
        user = attrs.get("user", getattr(self.instance, "user", None))
        group = attrs.get("group", getattr(self.instance, "group", None))
        if (user is None) == (group is None):
            raise serializers.ValidationError({"user": "give exactly one of user or group"})
        return attrs
