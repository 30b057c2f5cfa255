from collections.abc import Iterable
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.catalog.options import DISK_KINDS
from apps.clusters import autoscale, connection, idle, notebook, perimeter, queue_position
from apps.clusters.data_path import InstanceDataPath, data_path, label_destinations
from apps.clusters.launch_requests import LEASE_MAX_HOURS, LEASE_MIN_HOURS, MAX_ID
from apps.clusters.models import Cluster, ClusterEvent, Instance, ScalingPolicy
from apps.clusters.provisioning import launch_provisioning
from apps.tokens.authentication import secrets_withheld

from .progress import QueueSerializer

STATE_STAMPS = [
    "placing",
    "configuring",
    "running",
    "degraded",
    "stopping",
    "stopped",
    "destroying",
    "destroyed",
    "failed",
]


def cluster_url(request, cluster: Cluster) -> str:
    return request.build_absolute_uri(reverse("api:cluster-detail", args=[cluster.id]))


# The cluster list, written by hand (issue 34: DRF's serializer and the model instances behind
# it were a fifth of a list call's CPU): the columns it reads and each row as ClusterSerializer
# writes it, key for key and value for value (apps/api/tests/test_cluster_answers_by_hand.py holds
# the two to the same bytes). ClusterSerializer stays the schema's description of a row.
LIST_COLUMNS = (
    "id",
    "name",
    "owner__username",
    "version__product__name",
    "version__version",
    "state",
    "reason",
    "created",
    "expires_at",
)
_DATETIME = serializers.DateTimeField()


def _when(value) -> str | None:
    return _DATETIME.to_representation(value) if value is not None else None


def list_rows(request, rows: Iterable[tuple]) -> list[dict]:
    """LIST_COLUMNS rows (values_list) as ClusterSerializer's dicts."""
    # Every cluster's URL is the same but for its id: reverse() and the host once.
    head = request.build_absolute_uri(reverse("api:cluster-detail", args=[0])).removesuffix("0")
    return [
        {
            "id": cluster_id,
            "url": f"{head}{cluster_id}",
            "name": name,
            "owner": owner,
            "product": product,
            "version": version,
            "state": state,
            "reason": reason,
            "created": _when(created),
            "expires_at": _when(expires_at),
        }
        for cluster_id, name, owner, product, version, state, reason, created, expires_at in rows
    ]


class ClusterSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    owner = serializers.CharField(source="owner.username")
    product = serializers.CharField(source="version.product.name")
    version = serializers.CharField(source="version.version")

    class Meta:
        model = Cluster
        fields = [
            "id",
            "url",
            "name",
            "owner",
            "product",
            "version",
            "state",
            "reason",
            "created",
            "expires_at",
        ]

    def get_url(self, cluster: Cluster) -> str:
        return cluster_url(self.context["request"], cluster)


class DiskHeldSerializer(serializers.Serializer):
    """A whole disk an instance holds: where the instance sees it, on which node, of which kind.
    Where it sits on the node (host path, device) is for staff only."""

    node = serializers.CharField(source="disk.node.name")
    destination = serializers.CharField()  # set by data_path.label_destinations
    kind = serializers.CharField(source="disk.kind")

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is not None and request.user.is_staff:
            data.update(host_path=instance.disk.mount_path, device=instance.disk.device)
        return data


class InstanceSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", allow_null=True, default=None)
    address = serializers.CharField(source="address.ip", allow_null=True, default=None)
    container_state = serializers.CharField(source="state")
    disks = serializers.SerializerMethodField()

    class Meta:
        model = Instance
        fields = [
            "hostname",
            "role",
            "index",
            "node",
            "address",
            "container_id",
            "container_state",
            "cores",
            "memory_mb",
            "disk_kind",
            "disks",
        ]

    @extend_schema_field(DiskHeldSerializer(many=True))
    def get_disks(self, instance: Instance) -> list:
        label_destinations(instance.cluster, [instance], "active_allocations")
        held = instance.active_allocations  # type: ignore[attr-defined]  # detail_queryset's
        return DiskHeldSerializer(held, many=True, context=self.context).data  # type: ignore[return-value]


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = ClusterEvent
        fields = ["at", "level", "message"]


class EndpointSerializer(serializers.Serializer):
    role = serializers.CharField()
    hostname = serializers.CharField()
    name = serializers.CharField()
    address = serializers.CharField(allow_null=True)
    port = serializers.IntegerField()
    protocol = serializers.CharField()
    url = serializers.CharField(allow_null=True)


class ConnectionStringSerializer(serializers.Serializer):
    name = serializers.CharField()
    role = serializers.CharField()
    hostname = serializers.CharField(help_text="empty when the string is for the whole cluster")
    value = serializers.CharField()


class ClusterCredentialsSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField()
    secret = serializers.CharField(help_text="shared by the cluster's daemons (Spark, MongoDB)")


class ConnectionSerializer(serializers.Serializer):
    endpoints = EndpointSerializer(many=True)
    strings = ConnectionStringSerializer(many=True)
    credentials = ClusterCredentialsSerializer(
        allow_null=True, help_text="owner and staff only; null for a read-only token"
    )
    credentials_hidden = serializers.BooleanField()
    credentials_note = serializers.CharField(
        help_text="why the credentials are hidden from this caller (a read-only token), or empty"
    )
    ssh = serializers.DictField(allow_null=True, help_text="command, user, address, port")
    web_uis = serializers.ListField(child=serializers.DictField())


class DataDiskSerializer(serializers.Serializer):
    path = serializers.CharField(
        help_text="where the instance sees it: /data/N, or where the product's definition puts it"
    )
    node = serializers.CharField()
    kind = serializers.CharField()
    seq_read_mbps = serializers.FloatField(allow_null=True)
    seq_write_mbps = serializers.FloatField(allow_null=True)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is not None and request.user.is_staff:  # a node's own paths: staff only
            data.update(mount=instance.mount, device=instance.device)
        return data


class InstanceDataPathSerializer(serializers.Serializer):
    hostname = serializers.CharField()
    role = serializers.CharField()
    disks = DataDiskSerializer(many=True)
    settings = serializers.DictField(child=serializers.CharField())


class ProvisioningSerializer(serializers.Serializer):
    seconds = serializers.FloatField()
    running = serializers.BooleanField(help_text="false while the launch goes on, or if it failed")
    phases = serializers.DictField(child=serializers.FloatField())


class IdleStatusSerializer(serializers.Serializer):
    limit_minutes = serializers.IntegerField(allow_null=True, help_text="its own limit")
    effective_limit_minutes = serializers.IntegerField(
        allow_null=True, help_text="its own, else its owner's group default; null: never"
    )
    from_group = serializers.BooleanField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    last_signal = serializers.CharField(help_text="what last counted as use")
    stops_at = serializers.DateTimeField(allow_null=True, help_text="if nothing uses it")
    warned = serializers.BooleanField()


class IdleLimitSerializer(serializers.Serializer):
    minutes = serializers.IntegerField(
        allow_null=True,
        min_value=idle.MIN_LIMIT_MINUTES,
        max_value=idle.MAX_LIMIT_MINUTES,
        help_text="stop (data kept) after this long unused; null: no limit of its own",
    )


SOURCES_HELP = (
    "IPv4 addresses or CIDRs (10.8.0.0/16, 192.0.2.7) that reach the cluster's ports directly, "
    "besides its members, the portal and the site's ranges; SSH (22) answers everyone with the "
    "owner's keys. Empty: nobody else."
)


class AllowedSourcesSerializer(serializers.Serializer):
    allowed_sources = serializers.ListField(
        child=serializers.CharField(), allow_empty=True, help_text=SOURCES_HELP
    )

    def validate_allowed_sources(self, value: list[str]) -> list[str]:
        try:
            return perimeter.parse_sources(value)  # the one rule: a bad entry is named
        except perimeter.SourceError as error:
            raise serializers.ValidationError(str(error)) from None


class PerimeterSerializer(serializers.Serializer):
    allowed_sources = serializers.ListField(child=serializers.CharField(), help_text=SOURCES_HELP)
    site_sources = serializers.ListField(
        child=serializers.CharField(),
        help_text="the portal's and the site's ranges (a bastion, a VPN): every cluster lets "
        "them in",
    )


class AutoscalingSerializer(serializers.Serializer):
    """A cluster's autoscaling policy (Dataproc's fields). Every cooldown the pending work its
    product reports (YARN's pending memory; the cores Spark's applications wait for), averaged,
    decides a resize within [min_workers, max_workers] through the resize path."""

    min_workers = serializers.IntegerField(min_value=0)
    max_workers = serializers.IntegerField(min_value=0)
    cooldown_seconds = serializers.IntegerField(
        required=False, help_text="at least the site's minimum (120 s)"
    )
    scale_up_factor = serializers.FloatField(required=False, min_value=0, max_value=1)
    scale_down_factor = serializers.FloatField(required=False, min_value=0, max_value=1)
    min_change = serializers.IntegerField(required=False, min_value=1)
    decommission_timeout_seconds = serializers.IntegerField(required=False, min_value=0)
    decided_at = serializers.DateTimeField(read_only=True, allow_null=True)
    decision = serializers.CharField(read_only=True, help_text="the last decision, in words")


class NotebookStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["adding", "starting", "ready", "stopped", "failed"])
    words = serializers.CharField(help_text="the state in words, with the reason of a failure")
    hostname = serializers.CharField(help_text="its instance (notebook-0)")


class ClusterDetailSerializer(ClusterSerializer):
    timestamps = serializers.SerializerMethodField()
    notebook = serializers.SerializerMethodField()
    idle = serializers.SerializerMethodField()
    autoscaling = serializers.SerializerMethodField()
    instances = InstanceSerializer(many=True)
    endpoints = serializers.SerializerMethodField()
    connection = serializers.SerializerMethodField()
    events = EventSerializer(many=True)
    reuse_data_of: "serializers.PrimaryKeyRelatedField[Cluster]"
    reuse_data_of = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    queue = serializers.SerializerMethodField()
    provisioning = serializers.SerializerMethodField()
    data_path = serializers.SerializerMethodField()
    allowed_sources = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text=SOURCES_HELP
    )
    site_sources = serializers.SerializerMethodField()

    class Meta(ClusterSerializer.Meta):
        fields = [
            *ClusterSerializer.Meta.fields,
            "options",
            "reuse_data_of",
            "timestamps",
            "instances",
            "endpoints",
            "connection",
            "events",
            "queue",
            "provisioning",
            "data_path",
            "idle",
            "autoscaling",
            "notebook",
            "allowed_sources",
            "site_sources",
        ]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_site_sources(self, cluster: Cluster) -> list[str]:
        """The portal's and the site's ranges (a bastion, a VPN): every cluster lets them in."""
        return perimeter.site_sources()

    @extend_schema_field(NotebookStateSerializer(allow_null=True))
    def get_notebook(self, cluster: Cluster) -> dict | None:
        """The notebook's state (a Spark cluster's JupyterLab): ready once JupyterLab answers;
        null when the cluster has none."""
        found = notebook.state_of(cluster)
        return NotebookStateSerializer(found).data if found else None

    @extend_schema_field(AutoscalingSerializer(allow_null=True))
    def get_autoscaling(self, cluster: Cluster) -> dict | None:
        """The autoscaling policy and its last decision; null without one."""
        policy = autoscale.policy_of(cluster)
        return AutoscalingSerializer(policy).data if policy else None

    @extend_schema_field(IdleStatusSerializer)
    def get_idle(self, cluster: Cluster) -> dict:
        """Idle stop: the limit, what last used the cluster and when it stops if unused."""
        return IdleStatusSerializer(idle.status(cluster)).data

    @extend_schema_field(InstanceDataPathSerializer(many=True))
    def get_data_path(self, cluster: Cluster) -> list[dict]:
        """Each instance's whole disks (node, device, kind, measured MB/s) and the product
        settings they decide; empty before placement."""
        # The instances and their disks as the detail query read them (views.detail_queryset).
        placed = sorted((i for i in cluster.instances.all() if i.active), key=lambda i: i.id)
        paths = data_path(cluster, placed)
        # many=True makes it a ReturnList, which DRF's stubs type as a ReturnDict.
        return InstanceDataPathSerializer(paths, many=True, context=self.context).data  # type: ignore[return-value]

    @extend_schema_field(ProvisioningSerializer(allow_null=True))
    def get_provisioning(self, cluster: Cluster) -> dict | None:
        """Seconds from the launch request to running, and per phase (queued, placing,
        configuring); so far while the launch goes on."""
        found = launch_provisioning(cluster)
        return found.as_dict() if found else None

    @extend_schema_field(QueueSerializer(allow_null=True))
    def get_queue(self, cluster: Cluster) -> dict | None:
        """Where a queued cluster stands in the admission queue and why it waits; else null."""
        place = queue_position.position(cluster)
        return QueueSerializer(place).data if place else None

    @extend_schema_field(serializers.DictField(child=serializers.DateTimeField(allow_null=True)))
    def get_timestamps(self, cluster: Cluster) -> dict:
        stamps = {"created": cluster.created}
        stamps.update({state: getattr(cluster, f"{state}_at") for state in STATE_STAMPS})
        return {
            k: serializers.DateTimeField().to_representation(v) if v else None
            for k, v in stamps.items()
        }

    @extend_schema_field(EndpointSerializer(many=True))
    def get_endpoints(self, cluster: Cluster) -> list[dict]:
        """Each published port of the version at the address of every instance of its role."""
        return connection.endpoints(cluster)

    @extend_schema_field(ConnectionSerializer)
    def get_connection(self, cluster: Cluster) -> dict:
        """Connection strings, credentials (owner and staff only), ssh login and web UIs."""
        request = self.context["request"]
        withheld = secrets_withheld(request)
        return connection.connection_details(cluster, request.user, withheld).as_dict()


def _text(value) -> str | None:
    return str(value) if value is not None else None


def _number(value) -> float | None:
    return float(value) if value is not None else None


def _whole(value) -> int | None:
    return int(value) if value is not None else None


def _yes(value) -> bool | None:
    return bool(value) if value is not None else None


def _instance_dict(instance: Instance, staff: bool) -> dict:
    """InstanceSerializer's, with its DiskHeldSerializer's disks (their destinations labelled:
    detail_dict)."""
    disks = []
    for held in instance.active_allocations:  # type: ignore[attr-defined]  # detail_queryset's
        disk = {
            "node": _text(held.disk.node.name),
            "destination": _text(held.destination),
            "kind": _text(held.disk.kind),
        }
        if staff:
            disk.update(host_path=held.disk.mount_path, device=held.disk.device)
        disks.append(disk)
    return {
        "hostname": _text(instance.hostname),
        "role": _text(instance.role),
        "index": _whole(instance.index),
        "node": _text(instance.node.name) if instance.node is not None else None,
        "address": _text(instance.address.ip) if instance.address is not None else None,
        "container_id": _text(instance.container_id),
        "container_state": _text(instance.state),
        "cores": _whole(instance.cores),
        "memory_mb": _whole(instance.memory_mb),
        "disk_kind": _text(instance.disk_kind),
        "disks": disks,
    }


def _data_path_dict(path: InstanceDataPath, staff: bool) -> dict:
    """InstanceDataPathSerializer's, with its DataDiskSerializer's disks."""
    disks = []
    for data_disk in path.disks:
        disk: dict[str, object] = {
            "path": _text(data_disk.path),
            "node": _text(data_disk.node),
            "kind": _text(data_disk.kind),
            "seq_read_mbps": _number(data_disk.seq_read_mbps),
            "seq_write_mbps": _number(data_disk.seq_write_mbps),
        }
        if staff:
            disk.update(mount=data_disk.mount, device=data_disk.device)
        disks.append(disk)
    return {
        "hostname": _text(path.hostname),
        "role": _text(path.role),
        "disks": disks,
        "settings": {str(k): _text(v) for k, v in path.settings.items()},
    }


def detail_dict(request, cluster: Cluster) -> dict:
    """ClusterDetailSerializer(cluster).data written by hand (issue 34: DRF built some thirty
    serializers and their fields for every detail, a quarter of its CPU), key for key and value
    for value; apps/api/tests/test_cluster_answers_by_hand.py holds the two to the same bytes in
    every shape a cluster takes. The cluster comes from views.detail_queryset; the method
    fields call what the serializer's methods call. ClusterDetailSerializer stays the schema's
    description, and the writer of the answers of launches and actions."""
    staff = request.user.is_staff
    # The cluster's definition read once for all its instances' disks, not once an instance.
    label_destinations(cluster, list(cluster.instances.all()), "active_allocations")
    instances = [_instance_dict(instance, staff) for instance in cluster.instances.all()]
    placed = sorted((i for i in cluster.instances.all() if i.active), key=lambda i: i.id)
    paths = [_data_path_dict(path, staff) for path in data_path(cluster, placed)]
    place = queue_position.position(cluster)
    provisioning = launch_provisioning(cluster)
    idle_status = idle.status(cluster)
    found = notebook.state_of(cluster)
    stamps = {"created": cluster.created}
    stamps.update({state: getattr(cluster, f"{state}_at") for state in STATE_STAMPS})
    return {
        **list_rows(
            request,
            [
                (
                    cluster.id,
                    cluster.name,
                    cluster.owner.username,
                    cluster.version.product.name,
                    cluster.version.version,
                    cluster.state,
                    cluster.reason,
                    cluster.created,
                    cluster.expires_at,
                )
            ],
        )[0],
        "options": cluster.options,
        "reuse_data_of": cluster.reuse_data_of_id,
        "timestamps": {k: _when(v) for k, v in stamps.items()},
        "instances": instances,
        "endpoints": connection.endpoints(cluster),
        "connection": connection.connection_details(
            cluster, request.user, secrets_withheld(request)
        ).as_dict(),
        "events": [
            {"at": _when(event.at), "level": _text(event.level), "message": _text(event.message)}
            for event in cluster.events.all()
        ],
        "queue": {
            "position": _whole(place.position),
            "length": _whole(place.length),
            "order": _text(place.order),
            "reason": _text(place.reason),
        }
        if place
        else None,
        "provisioning": provisioning.as_dict() if provisioning else None,
        "data_path": paths,
        "idle": {
            "limit_minutes": _whole(idle_status["limit_minutes"]),
            "effective_limit_minutes": _whole(idle_status["effective_limit_minutes"]),
            "from_group": _yes(idle_status["from_group"]),
            "last_used_at": _when(idle_status["last_used_at"]),
            "last_signal": _text(idle_status["last_signal"]),
            "stops_at": _when(idle_status["stops_at"]),
            "warned": _yes(idle_status["warned"]),
        },
        "autoscaling": _autoscaling(autoscale.policy_of(cluster)),
        "notebook": {
            "state": _text(found.state),
            "words": _text(found.words),
            "hostname": _text(found.hostname),
        }
        if found
        else None,
        "allowed_sources": [str(source) for source in cluster.allowed_sources],
        "site_sources": perimeter.site_sources(),
    }


class LaunchSerializer(serializers.Serializer):
    """Launch-level keys; every other key of the body is a product option (see the version's
    ``options``), e.g. ``size``, ``disks``, ``cpu``, ``mem``. This documents the body (the
    OpenAPI schema); apps.clusters.launch_requests.parse_launch checks it, as for the web form."""

    name = serializers.SlugField(max_length=63, required=False)
    disk_kind = serializers.ChoiceField(choices=list(DISK_KINDS), required=False)
    lease = serializers.FloatField(
        required=False, help_text="hours", min_value=LEASE_MIN_HOURS, max_value=LEASE_MAX_HOURS
    )
    reuse_data_from = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        help_text="id of a destroyed cluster of yours, of the same product",
    )
    allowed_sources = serializers.ListField(
        child=serializers.CharField(), required=False, help_text=SOURCES_HELP
    )


class ClusterCreateSerializer(LaunchSerializer):
    product = serializers.CharField()
    version = serializers.CharField()

    def to_internal_value(self, data: Any) -> dict:
        # Only which version: the launch keys are parse_launch's (one parser, one message).
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in LaunchSerializer._declared_fields}
        return super().to_internal_value(data)


class ExtendSerializer(serializers.Serializer):
    hours = serializers.FloatField(min_value=0.001, max_value=10**6)


class ResizeSerializer(serializers.Serializer):
    """Either a horizontal resize (`workers`) or a vertical one (`role` with new `cores`,
    `memory_mb` or both for each of its instances), not both at once."""

    workers = serializers.IntegerField(
        required=False,
        help_text="Instances of the product's scalable role (its size option: workers, nodes)",
    )
    role = serializers.CharField(
        required=False, help_text="The role whose instances get new cores or memory"
    )
    cores = serializers.IntegerField(
        required=False, min_value=1, help_text="New cores for each instance of `role`"
    )
    memory_mb = serializers.IntegerField(
        required=False, min_value=1, help_text="New memory (MB) for each instance of `role`"
    )

    def validate(self, attrs: dict) -> dict:
        vertical = {"role", "cores", "memory_mb"} & attrs.keys()
        if "workers" in attrs and vertical:
            raise serializers.ValidationError(
                {
                    "workers": "give either workers (more or fewer instances) or role with "
                    "cores or memory_mb (bigger or smaller instances), not both"
                }
            )
        if "workers" not in attrs and "role" not in attrs:
            raise serializers.ValidationError(
                {"workers": "give workers, or role with cores or memory_mb"}
            )
        if "workers" not in attrs and not {"cores", "memory_mb"} & attrs.keys():
            raise serializers.ValidationError(
                {"cores": f"give new cores, memory_mb or both for the {attrs['role']}s"}
            )
        return attrs


class ExtendedSerializer(serializers.Serializer):
    expires_at = serializers.DateTimeField()


def _autoscaling(policy: ScalingPolicy | None) -> dict | None:
    """AutoscalingSerializer's answer, by hand (as the rest of detail_dict)."""
    if policy is None:
        return None
    return {
        "min_workers": policy.min_workers,
        "max_workers": policy.max_workers,
        "cooldown_seconds": policy.cooldown_seconds,
        "scale_up_factor": float(policy.scale_up_factor),
        "scale_down_factor": float(policy.scale_down_factor),
        "min_change": policy.min_change,
        "decommission_timeout_seconds": policy.decommission_timeout_seconds,
        "decided_at": _when(policy.decided_at),
        "decision": _text(policy.decision),
    }
