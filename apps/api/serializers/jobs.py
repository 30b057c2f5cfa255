"""The jobs API's serializers (apps/api/views/jobs.py): a job, a submit's form, a log query and
the listing of a job's output."""

from typing import Any, cast

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.clusters import access, logs
from apps.clusters.models import Cluster
from apps.jobs import ui
from apps.jobs.models import Job


class JobSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    log_url = serializers.SerializerMethodField()
    cluster_name = serializers.CharField(source="cluster.name")
    owner = serializers.CharField(source="owner.username")
    duration = serializers.FloatField(allow_null=True, help_text="seconds, running or ended")
    application_url = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id",
            "url",
            "log_url",
            "cluster",
            "cluster_name",
            "owner",
            "kind",
            "main",
            "main_class",
            "args",
            "py_files",
            "files",
            "properties",
            "output_path",
            "state",
            "exit_code",
            "application_id",
            "application_url",
            "reason",
            "cancel_requested",
            "submitted",
            "started",
            "ended",
            "duration",
        ]

    def get_url(self, job: Job) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:job-detail", args=[job.id]))

    def get_log_url(self, job: Job) -> str:
        return self.context["request"].build_absolute_uri(reverse("api:job-log", args=[job.id]))

    @extend_schema_field(
        serializers.URLField(
            allow_null=True,
            help_text="the application's page in the cluster's own web UI (YARN's "
            "ResourceManager, the Spark master), through the portal's web UI proxy; null "
            "without an application id, or while the cluster does not serve that UI",
        )
    )
    def get_application_url(self, job: Job) -> str | None:
        if not job.application_id:
            return None
        # A page of jobs looks each cluster's web UIs up once (the context is the page's).
        known = cast(dict[str, Any], self.context).setdefault("web_uis", {})
        if job.cluster_id not in known and job.cluster.state == Cluster.State.RUNNING:
            known[job.cluster_id] = access.web_uis(job.cluster)
        path = ui.application_url(job, known.get(job.cluster_id, []))
        return None if path is None else self.context["request"].build_absolute_uri(path)


class JobSubmitSerializer(serializers.Serializer):
    """The multipart form of a submit (documentation; the view reads the fields itself, so
    repeated fields and files keep their order). A JSON body takes the same names, without
    files: args a list, properties an object."""

    kind = serializers.ChoiceField(choices=Job.Kind.choices)
    main = serializers.FileField(
        help_text="the program (.py or .jar); or, as text, an absolute path in the master "
        "container, e.g. /opt/hadoop/share/hadoop/lib/hadoop-mapreduce-examples-3.4.2.jar, "
        "or, for MapReduce, a jar in the cluster's HDFS (hdfs:///user/me/app.jar)"
    )
    main_class = serializers.CharField(required=False, help_text="spark-jar: required")
    args = serializers.ListField(child=serializers.CharField(), required=False)
    py_files = serializers.ListField(child=serializers.FileField(), required=False)
    files = serializers.ListField(
        child=serializers.FileField(), required=False, help_text="in the job's folder"
    )
    properties = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="key=value (Spark --conf)"
    )
    output = serializers.CharField(
        required=False,
        help_text="the result's folder: relative to the job's folder, or, for MapReduce, in the "
        "cluster's HDFS (hdfs:///user/me/out)",
    )


class LogQuerySerializer(serializers.Serializer):
    since = serializers.IntegerField(
        min_value=0, default=0, help_text="the X-Log-Next of an earlier answer"
    )
    follow = serializers.BooleanField(
        default=False, help_text="keep the answer open and send new output as it comes"
    )
    # The caps of a cluster's log follow (apps/api/serializers/progress.py).
    seconds = serializers.IntegerField(
        min_value=1,
        max_value=logs.FOLLOW_SECONDS_MAX,
        default=logs.FOLLOW_SECONDS_DEFAULT,
        help_text="with follow: end the answer after this long (it also ends when the job "
        "ends); go on from `since` plus the characters received",
    )


class OutputFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    size = serializers.IntegerField()


class OutputsSerializer(serializers.Serializer):
    path = serializers.CharField()
    files = OutputFileSerializer(many=True)
