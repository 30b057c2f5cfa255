"""The CESGA Big Data PaaS REST API (bigdatacesga/paas) on top of Platter, so scripts written
for it keep working: same paths, status codes and JSON shapes, ``x-auth-token`` carrying a
Platter token. Errors are ``{"status", "error", "message"}`` as that API answers them.

A launch is registered at once in Platter, so the job a launch answers (``/queue/<id>``,
with the cluster id as job id) already redirects (303) to the cluster."""

from django.http import Http404
from django.urls import reverse
from rest_framework import exceptions, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.catalog.options import SECTIONS, describe
from apps.catalog.services import launchable_versions
from apps.catalog.spec import definition_of
from apps.clusters.connection import connection_details, endpoints
from apps.clusters.models import Cluster
from apps.clusters.services import request_destroy
from apps.tokens.authentication import HeaderTokenAuthentication, secrets_withheld

from .. import idempotency
from ..errors import ApiError, exception_handler
from ..launching import find_version, launch_from_body
from ..parsers import JSONParser
from ..permissions import visible_clusters
from ..views.clusters import detail_queryset
from .models import CesgaRegistration
from .status import cesga_status

WORDS = {
    400: "bad request",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    409: "conflict",
    413: "payload too large",
    422: "unprocessable entity",
    429: "too many requests",
}


def cesga_exception_handler(exc: Exception, context: dict) -> Response | None:
    response = exception_handler(exc, context)
    if response is None:
        return None
    body = dict(response.data)
    body["error"] = WORDS.get(response.status_code, body.get("error", "error"))
    if isinstance(exc, exceptions.NotAuthenticated):
        body["message"] = "no token has been provided"
    response.data = body
    return response


class AnyBodyAsJSONParser(JSONParser):
    """CESGA read bodies as JSON whatever their Content-Type (curl -d sends a form type)."""

    media_type = "*/*"


class CesgaView(APIView):
    authentication_classes = [HeaderTokenAuthentication]
    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser, AnyBodyAsJSONParser]
    schema = None  # documented by the CESGA project, not in Platter's OpenAPI

    def get_exception_handler(self):
        return cesga_exception_handler


def _dn(cluster: Cluster) -> str:
    version = cluster.version
    return (
        f"instances/{cluster.owner.username}/{version.product.name}/{version.version}/{cluster.id}"
    )


def _summary(cluster: Cluster) -> dict:
    dn = _dn(cluster)
    return {
        "result": "success",
        "uri": dn.replace("instances", "clusters", 1),
        "data": {"name": cluster.name, "dn": dn, "status": cesga_status(cluster)},
    }


def _cluster_url(request: Request, cluster: Cluster) -> str:
    return request.build_absolute_uri(
        reverse(
            "cesga:cluster",
            args=[
                cluster.owner.username,
                cluster.version.product.name,
                cluster.version.version,
                cluster.id,
            ],
        )
    )


class Products(CesgaView):
    def get(self, request: Request) -> Response:
        names = sorted({v.product.name for v in launchable_versions()})
        return Response({"products": names})


class ProductVersions(CesgaView):
    # Open in the CESGA API too: the list of versions is not restricted there.
    authentication_classes = []
    permission_classes = [AllowAny]

    def get(self, request: Request, name: str) -> Response:
        versions = launchable_versions().filter(product__name=name).order_by("version")
        return Response({"versions": [v.version for v in versions]})


class ProductVersion(CesgaView):
    def _version(self, name: str, version: str):
        found = find_version(name, version)
        if found is None:
            registration = CesgaRegistration.objects.filter(
                version__product__name=name, version__version=version
            ).first()
            if registration is not None and registration.missing:
                raise ApiError(
                    409,
                    "conflict",
                    f"{name} {version} is registered but not launchable yet: its "
                    f"{' and '.join(registration.missing)} must be PUT first",
                )
            raise Http404(f"no product {name} {version}")
        return found

    def get(self, request: Request, name: str, version: str) -> Response:
        found = self._version(name, version)
        return Response(
            {
                "name": found.product.name,
                "version": found.version,
                "description": found.description or found.product.description,
                "title": found.product.title,
                "image": found.image,
                "disk_kind": found.disk_kind,
            }
        )

    def post(self, request: Request, name: str, version: str) -> Response:
        """Launch; with an Idempotency-Key a retry gets the first answer (apps.api)."""

        def launch() -> Response:
            cluster = launch_from_body(request.user, self._version(name, version), request.data)
            job = request.build_absolute_uri(reverse("cesga:queue", args=[cluster.id]))
            return Response(
                {"url": job}, status=status.HTTP_202_ACCEPTED, headers={"Location": job}
            )

        return idempotency.once(request, launch)


class ProductOptions(CesgaView):
    def get(self, request: Request, name: str, version: str) -> Response:
        found = find_version(name, version)
        if found is None:
            raise Http404(f"no product {name} {version}")
        described = describe(found)
        return Response({key: described[key] for key in (*SECTIONS, "descriptions")})


class Queue(CesgaView):
    def get(self, request: Request, job: int) -> Response:
        cluster = visible_clusters(request.user).filter(id=job).first()
        if cluster is None:
            raise Http404("no such job")
        url = _cluster_url(request, cluster)
        return Response(
            {"status": cesga_status(cluster), "url": url},
            status=status.HTTP_303_SEE_OTHER,
            headers={"Location": url},
        )


class Clusters(CesgaView):
    """/clusters, /clusters/<user>, …/<product>, …/<version>: a user sees only their own."""

    def get(self, request: Request, **names: str) -> Response:
        clusters = visible_clusters(request.user).select_related("owner", "version__product")
        lookups = {
            "username": "owner__username",
            "product": "version__product__name",
            "version": "version__version",
        }
        clusters = clusters.filter(**{lookups[k]: v for k, v in names.items()})
        clusters = clusters.prefetch_related("instances").order_by("id")
        return Response({"clusters": [_summary(c) for c in clusters]})


class OneCluster(CesgaView):
    def cluster(self, request: Request, username: str, product: str, version: str, id: int):
        found = (
            detail_queryset(visible_clusters(request.user))
            .filter(
                owner__username=username,
                version__product__name=product,
                version__version=version,
                id=id,
            )
            .first()
        )
        if found is None:
            raise Http404("no such cluster")
        return found


class ClusterDetail(OneCluster):
    def get(self, request: Request, **names) -> Response:
        """CESGA's summary, plus Platter's connection details (apps.clusters.connection)."""
        cluster = self.cluster(request, **names)
        body = _summary(cluster)
        withheld = secrets_withheld(request)  # a read-only token reads no credentials
        body["data"]["connection"] = connection_details(cluster, request.user, withheld).as_dict()
        return Response(body)

    def delete(self, request: Request, **names) -> Response:
        request_destroy(self.cluster(request, **names).id, actor=request.user)
        return Response({"message": "success"})


class ClusterNodes(OneCluster):
    def get(self, request: Request, **names) -> Response:
        cluster = self.cluster(request, **names)
        staff = request.user.is_staff
        return Response({"nodes": [_node(cluster, i, staff) for i in cluster.instances.all()]})


class ClusterServices(OneCluster):
    """CESGA's services are the product's daemons; Platter's closest are the roles."""

    def get(self, request: Request, **names) -> Response:
        cluster = self.cluster(request, **names)
        roles: dict[str, list[str]] = {}
        for instance in cluster.instances.all():
            roles.setdefault(instance.role, []).append(instance.hostname)
        ports: dict[str, list[int]] = {}
        for endpoint in endpoints(cluster):
            found = ports.setdefault(endpoint["role"], [])
            if endpoint["port"] not in found:
                found.append(endpoint["port"])
        services = [
            {
                "name": role,
                "status": cesga_status(cluster),
                "nodes": hosts,
                "ports": ports.get(role, []),
            }
            for role, hosts in roles.items()
        ]
        return Response({"services": services})


def _node(cluster: Cluster, instance, staff: bool = False) -> dict:
    host = instance.node.name if instance.node else None
    held = instance.active_allocations
    where = definition_of(cluster.definition).disk_destinations(instance.role, len(held))
    disks = [
        {
            "name": f"disk{n}",
            "host": host,
            "type": a.disk.kind,
            "origin": a.disk.mount_path if staff else None,  # a node's path: staff only
            "destination": path,
            "mode": "rw",
        }
        for n, (a, path) in enumerate(zip(held, where, strict=True), start=1)
    ]
    address = instance.address.ip if instance.address else None
    return {
        "name": instance.hostname,
        "clustername": cluster.name,
        "docker_image": instance.image,
        "cpu": instance.cores,
        "mem": instance.memory_mb,
        "host": host,
        "id": instance.container_id,
        "status": instance.state,
        "tags": [instance.role],
        "disks": disks,
        "networks": [{"name": "eth0", "address": address}],
    }
