from django.contrib import admin, messages

from apps.nodes.pki import describe_credentials
from apps.tasks import bus

from .models import Address, Disk, Network, Node
from .services import set_disk_state, set_node_state


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    """Nodes, their states and credentials. What their instances use is the clusters' to say:
    apps/clusters/usage_admin.py registers this page again with those columns."""

    list_display = ["name", "state", "endpoint"]
    list_filter = ["state"]
    search_fields = ["name", "endpoint"]
    actions = ["drain", "activate", "discover_disks", "bench_disks"]

    # Credentials: the tls_dir path and what is in it, never a key (keys stay in files).
    readonly_fields = ["credentials"]

    @admin.display(description="credentials")
    def credentials(self, node: Node) -> str:
        return describe_credentials(node.transport, node.tls_dir)

    def save_model(self, request, obj: Node, form, change: bool) -> None:
        # A state picked in the form goes through the service, which locks and audits it.
        if not (change and "state" in form.changed_data):
            super().save_model(request, obj, form, change)
            return
        wanted, obj.state = obj.state, form.initial["state"]
        super().save_model(request, obj, form, change)
        set_node_state(obj.id, wanted, actor=request.user)
        obj.state = wanted

    @admin.action(description="Drain: keep running instances, place nothing new")
    def drain(self, request, queryset):
        for node in queryset:
            set_node_state(node.id, Node.State.DRAINING, actor=request.user)
        messages.success(request, f"{queryset.count()} node(s) draining")

    @admin.action(description="Activate: accept new instances")
    def activate(self, request, queryset):
        for node in queryset:
            set_node_state(node.id, Node.State.ACTIVE, actor=request.user)
        messages.success(request, f"{queryset.count()} node(s) active")

    @admin.action(description="Discover disks mounted under the disk root")
    def discover_disks(self, request, queryset):
        from apps.nodes import NodeError

        from .discovery import discover

        for node in queryset:
            try:
                report = discover(node)
            except NodeError as error:
                messages.error(request, str(error))
                continue
            text = f"{node.name}: {len(report.created)} new, {len(report.updated)} updated disks"
            if report.missing:
                messages.warning(request, f"{text}; no longer mounted: {', '.join(report.missing)}")
            else:
                messages.success(request, text)

    @admin.action(description="Benchmark free disks with fio, one at a time (in the background)")
    def bench_disks(self, request, queryset):
        for node in queryset:  # by name: the inventory does not import the workers
            bus.dispatch(bus.BENCH_DISKS, node.id)
        messages.success(
            request, f"benchmark queued for {queryset.count()} node(s); results show on Disks"
        )


class SpeedFilter(admin.SimpleListFilter):
    title = "measured speed"
    parameter_name = "speed"

    def lookups(self, request, model_admin):
        return [
            ("slow", "far below its siblings"),
            ("ok", "like its siblings"),
            ("unmeasured", "not measured"),
        ]

    def queryset(self, request, queryset):
        if self.value() == "slow":
            return queryset.exclude(slow_reason="")
        if self.value() == "ok":
            return queryset.filter(slow_reason="", measured_at__isnull=False)
        if self.value() == "unmeasured":
            return queryset.filter(measured_at__isnull=True)
        return queryset


@admin.register(Disk)
class DiskAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "kind",
        "state",
        "holder",
        "last_holder",
        "seq_mbps",
        "rand_iops",
        "slow",
        "measured_at",
    ]
    list_filter = ["state", "kind", "node__state", SpeedFilter]
    search_fields = ["node__name", "mount_path", "device"]
    list_select_related = ["node"]
    actions = ["mark_failed", "mark_retired", "mark_available"]
    readonly_fields = [*Disk.BENCH_FIELDS, "measured_at", "slow_reason"]

    @admin.display(description="seq MB/s read / write")
    def seq_mbps(self, disk: Disk) -> str:
        if disk.measured_at is None:
            return "-"
        return f"{disk.seq_read_mbps or 0:.0f} / {disk.seq_write_mbps or 0:.0f}"

    @admin.display(description="4k IOPS read / write (QD1, QD64)")
    def rand_iops(self, disk: Disk) -> str:
        if disk.measured_at is None:
            return "-"
        values = (
            disk.rand_read_iops_qd1,
            disk.rand_write_iops_qd1,
            disk.rand_read_iops_qd64,
            disk.rand_write_iops_qd64,
        )
        r1, w1, r64, w64 = (f"{v or 0:.0f}" for v in values)
        return f"{r1} / {w1}, {r64} / {w64}"

    @admin.display(description="slow", boolean=True)
    def slow(self, disk: Disk) -> bool | None:
        return bool(disk.slow_reason) if disk.measured_at else None

    @admin.display(description="held by")
    def holder(self, disk: Disk) -> str:
        active = disk.allocations.filter(active=True).select_related("instance__cluster").first()
        return active.holder if active else "-"

    @admin.display(description="keeps data of")
    def last_holder(self, disk: Disk) -> str:
        kept = disk.allocations.filter(data_kept=True).select_related("instance__cluster").first()
        return kept.holder if kept else "-"

    def get_readonly_fields(self, request, obj=None):
        # The state of an existing disk changes through the actions (locked and audited).
        return [*self.readonly_fields, "state"] if obj is not None else self.readonly_fields

    def _mark(self, request, queryset, state: str) -> None:
        marks = set_disk_state(queryset.values_list("id", flat=True), state, actor=request.user)
        messages.success(request, f"{len(marks.changed)} disk(s) marked {state}")
        for reason in marks.refused:
            messages.warning(request, f"Left as it was: {reason}")

    @admin.action(description="Mark failed")
    def mark_failed(self, request, queryset):
        self._mark(request, queryset, Disk.State.FAILED)

    @admin.action(description="Mark retired")
    def mark_retired(self, request, queryset):
        self._mark(request, queryset, Disk.State.RETIRED)

    @admin.action(description="Mark available again (only disks nobody holds)")
    def mark_available(self, request, queryset):
        self._mark(request, queryset, Disk.State.AVAILABLE)


@admin.register(Network)
class NetworkAdmin(admin.ModelAdmin):
    list_display = ["name", "subnet", "isolated", "vlan", "parent", "holder", "free"]
    list_filter = ["isolated"]
    search_fields = ["name", "subnet"]
    readonly_fields = ["holder"]  # set and cleared by reservations only

    @admin.display(description="free addresses")
    def free(self, network: Network) -> int:
        return network.addresses.filter(held=False).count()


@admin.register(Address)
class AddressAdmin(admin.ModelAdmin):
    list_display = ["ip", "network", "held"]
    list_filter = ["held", "network"]
    search_fields = ["ip"]

    def has_add_permission(self, request) -> bool:
        return False  # generated from the network's range
