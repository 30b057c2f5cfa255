"""How a cluster is getting on: its events after a cursor, its place in the admission queue,
and the query parameters of its container logs."""

from rest_framework import serializers

from apps.clusters import logs
from apps.clusters.models import ClusterEvent

EVENTS_LIMIT_MAX = 1000


class QueueSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="1 is the next cluster the scheduler tries")
    length = serializers.IntegerField(help_text="queued clusters in all")
    order = serializers.CharField(help_text="fifo or sjf (shortest lease first)")
    reason = serializers.CharField(help_text="why it waits")


class EventEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = ClusterEvent
        fields = ["id", "at", "level", "message"]


class EventPageSerializer(serializers.Serializer):
    events = EventEntrySerializer(many=True)
    next = serializers.CharField(help_text="the cursor to pass as ?since= for later events")


class EventQuerySerializer(serializers.Serializer):
    since = serializers.RegexField(
        r"^\d{1,18}$",
        required=False,
        help_text="a cursor from an earlier answer's `next`; without it, from the first event",
        error_messages={"invalid": "not a cursor: pass the `next` of an earlier answer"},
    )
    limit = serializers.IntegerField(min_value=1, max_value=EVENTS_LIMIT_MAX, default=100)


class LogQuerySerializer(serializers.Serializer):
    instance = serializers.CharField(
        required=False, help_text="an instance's hostname, e.g. worker-0; default the first"
    )
    tail = serializers.IntegerField(
        min_value=1,
        max_value=logs.TAIL_MAX,
        default=logs.TAIL_DEFAULT,
        help_text="how many of the last lines",
    )
    follow = serializers.BooleanField(
        default=False, help_text="keep the answer open and send lines as they come"
    )
    seconds = serializers.IntegerField(
        min_value=1,
        max_value=logs.FOLLOW_SECONDS_MAX,
        default=logs.FOLLOW_SECONDS_DEFAULT,
        help_text="with follow: end the answer after this long (it also ends when the "
        "container stops)",
    )
    timestamps = serializers.BooleanField(
        default=False, help_text="start each line with Docker's timestamp (a `since` cursor)"
    )
    since = serializers.CharField(
        required=False,
        help_text="only lines after this timestamp, e.g. the last line's with timestamps=true",
    )

    def validate_since(self, value: str) -> str:
        try:
            return logs.normal_cursor(value)
        except logs.BadCursor as error:
            raise serializers.ValidationError(str(error)) from None
