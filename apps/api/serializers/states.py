"""The cluster life cycle's two tables (apps.clusters.states) as the API publishes them."""

from rest_framework import serializers

from apps.clusters.states import Containers


class StateSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="the state as clusters' `state` field spells it")
    label = serializers.CharField(help_text="its name for people")  # type: ignore[assignment]  # the API's key
    meaning = serializers.CharField(help_text="what it means, for people")
    to = serializers.ListField(child=serializers.CharField(), help_text="the states it may move to")
    live = serializers.BooleanField(help_text="counts against its owner's quota; not over")
    leased = serializers.BooleanField(help_text="its lease runs: it expires, it can be extended")
    moving = serializers.BooleanField(
        help_text="it moves on by itself (the queue or a worker): worth polling"
    )
    watched = serializers.BooleanField(
        help_text="its containers should run: the portal checks them against the nodes"
    )
    containers = serializers.ChoiceField(
        choices=[str(c) for c in Containers], help_text="whether its containers exist"
    )
    logs = serializers.BooleanField(help_text="its containers may be writing log lines")
    resources = serializers.BooleanField(help_text="holds cores, memory, disks and addresses")
    phase = serializers.BooleanField(help_text="a phase of the launch's provisioning timeline")
    cesga = serializers.CharField(help_text="its status word in the CESGA API")


class OperationSerializer(serializers.Serializer):
    name = serializers.CharField()
    requested_in = serializers.ListField(
        child=serializers.CharField(), help_text="the states a request for it is taken in"
    )
    through = serializers.ListField(
        child=serializers.CharField(), help_text="the working states it carries a cluster through"
    )
    ends_in = serializers.CharField(help_text="the state it leaves a cluster in when it succeeds")


class LifeCycleSerializer(serializers.Serializer):
    states = StateSerializer(many=True)
    operations = OperationSerializer(many=True)
