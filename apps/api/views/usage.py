"""GET /api/v1/usage: core-, memory- and disk-hours (apps.usage), added up as asked; the same
rows as CSV with fixed columns at /api/v1/usage.csv."""

import csv
import io
from datetime import date, timedelta

from django.utils import timezone
from django.utils.http import content_disposition_header
from drf_spectacular.utils import extend_schema
from rest_framework import renderers, serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.usage.export import MAX_DAYS, csv_text, records
from apps.usage.services import (
    GROUPINGS,
    grand_total,
    totals,
    usage_rows,
    visible_clusters,
)


class UsageQuerySerializer(serializers.Serializer):
    # "from" is a Python keyword: the field is declared under it below.
    to = serializers.DateField(required=False, help_text="last UTC day, included (default today)")
    group_by = serializers.ChoiceField(choices=GROUPINGS, default="day")
    user = serializers.CharField(required=False, help_text="staff: one user's usage")
    group = serializers.CharField(required=False, help_text="staff: one quota group's usage")

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.DateField(
            required=False, help_text="first UTC day, included (default: the 1st of this month)"
        )
        return fields

    def validate(self, attrs: dict) -> dict:
        today = timezone.now().date()
        attrs["to"] = attrs.get("to") or today
        attrs["from"] = attrs.get("from") or attrs["to"].replace(day=1)
        if attrs["from"] > attrs["to"]:
            raise serializers.ValidationError({"from": "must not be after 'to'"})
        if attrs["to"] - attrs["from"] >= timedelta(days=MAX_DAYS):
            raise serializers.ValidationError({"to": f"a range is at most {MAX_DAYS} days"})
        return attrs


class TotalSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="the day, cluster, product, user or group")
    core_h = serializers.FloatField()
    mem_gb_h = serializers.FloatField()
    hdd_h = serializers.FloatField()
    ssd_h = serializers.FloatField()
    clusters = serializers.IntegerField()


class UsageSerializer(serializers.Serializer):
    to = serializers.DateField()

    def get_fields(self):
        return {"from": serializers.DateField(), **super().get_fields()}

    group_by = serializers.CharField()
    totals = TotalSerializer(many=True)
    total = serializers.DictField(child=serializers.FloatField())


def _rows(request: Request):
    query = UsageQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    wanted = query.validated_data
    others = wanted.get("user") not in (None, request.user.get_username()) or wanted.get("group")
    if others and not request.user.is_staff:
        raise PermissionDenied("only staff read other users' or groups' usage")
    clusters = visible_clusters(
        request.user,
        everyone=True,
        username=wanted.get("user", ""),
        group=wanted.get("group", ""),
    )
    first: date = wanted["from"]
    last: date = wanted["to"]
    return wanted, usage_rows(clusters, first, last)


class UsageView(APIView):
    """What your clusters held, per UTC day: core-hours, memory GB-hours, HDD- and SSD-disk
    hours (stopped clusters keep their disks, so they count). Staff read everyone's and may
    narrow to one `user` or quota `group`."""

    @extend_schema(parameters=[UsageQuerySerializer], responses=UsageSerializer)
    def get(self, request: Request) -> Response:
        wanted, rows = _rows(request)
        return Response(
            {
                "from": wanted["from"],
                "to": wanted["to"],
                "group_by": wanted["group_by"],
                "totals": [t.as_dict() for t in totals(rows, wanted["group_by"])],
                "total": grand_total(rows),
            }
        )


class CsvRenderer(renderers.BaseRenderer):
    """The usage lines (apps.usage.export.records) as CSV; an error body as a CSV too: its
    code and message on a line, then each field named wrong and why (the status says it
    failed, a spreadsheet shows why)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict):
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["error", "message"])
            writer.writerow([data.get("error", ""), data.get("message", "")])
            writer.writerows((field, problem) for field, problem in data.get("fields", {}).items())
            return out.getvalue().encode()
        return csv_text(data).encode()


class LineSerializer(serializers.Serializer):
    date = serializers.DateField()
    user = serializers.CharField()
    group = serializers.CharField()
    cluster = serializers.CharField()
    product = serializers.CharField()
    state = serializers.CharField()
    core_h = serializers.FloatField()
    mem_gb_h = serializers.FloatField()
    hdd_h = serializers.FloatField()
    ssd_h = serializers.FloatField()


class UsageCsvView(APIView):
    """The same usage as CSV, one line per cluster and day, with fixed columns:
    date,user,group,cluster,product,state,core_h,mem_gb_h,hdd_h,ssd_h. Clients that accept
    only JSON get the same lines as a JSON list."""

    # CSV first: what `*/*` (and no Accept) gets, as a browser's download.
    renderer_classes = [CsvRenderer, renderers.JSONRenderer]

    @extend_schema(
        parameters=[UsageQuerySerializer],
        responses={(200, "text/csv"): str, (200, "application/json"): LineSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        wanted, rows = _rows(request)
        name = f"platter-usage-{wanted['from']}-{wanted['to']}.csv"
        disposition = content_disposition_header(True, name)
        return Response(records(rows), headers={"Content-Disposition": disposition})
