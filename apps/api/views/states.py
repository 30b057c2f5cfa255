from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.clusters import states

from ..serializers.states import LifeCycleSerializer


class StatesView(APIView):
    """The cluster life cycle: every state a cluster can be in, what it means and where it may
    go, and the operations that carry clusters between them. Clients (the `platter` command)
    read their state rules from here instead of keeping copies."""

    @extend_schema(responses=LifeCycleSerializer)
    def get(self, request: Request) -> Response:
        return Response(LifeCycleSerializer(states.as_json()).data)
