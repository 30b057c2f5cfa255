from django.urls import reverse
from rest_framework import serializers

from ..models import Job


class JobSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    log_url = serializers.SerializerMethodField()
    cluster_name = serializers.CharField(source="cluster.name")
    owner = serializers.CharField(source="owner.username")
    duration = serializers.FloatField(allow_null=True, help_text="seconds, running or ended")

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
    follow = serializers.BooleanField(default=False)
    seconds = serializers.IntegerField(min_value=1, max_value=300, default=60)


class OutputFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    size = serializers.IntegerField()


class OutputsSerializer(serializers.Serializer):
    path = serializers.CharField()
    files = OutputFileSerializer(many=True)
