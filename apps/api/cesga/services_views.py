"""The newer API CESGA's later web UI speaks (bigdatacesga/web-ui, paas' services endpoints),
mapped onto Platter's products and clusters with the same tokens and permissions:

    GET    /services                              {"services": [names]} (and "products")
    GET    /services/<name>                       {"versions": [...]}
    GET    /services/<name>/<version>             the version, with its options
    POST   /services/<name>/<version>             launch: 201, "instances/<user>/<name>/<v>/<id>"
    DELETE /services?type=&name=&id=              destroy the caller's instance <id> of <name>
    GET    /instances[/<user>[/<service>[/<version>]]]   a user's instances (staff: anyone's)
    GET    /instances/<user>/<service>/<version>/<id>    one instance (also /nodes, /services)
    DELETE /instances/<user>/<service>/<version>/<id>

A CESGA service "type" (multi, single) has no Platter counterpart and is not needed to find an
instance: the id is the cluster's. Registration aliases (POST /services, PUT …/template) are
the same staff-only calls as under /products."""

from django.http import Http404
from django.urls import reverse
from rest_framework import status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog.options import SECTIONS, describe
from apps.catalog.services import launchable_versions
from apps.clusters.models import Cluster
from apps.clusters.services import request_destroy

from .. import idempotency
from ..errors import ApiError
from ..launching import find_version, launch_from_body
from ..permissions import visible_clusters
from .models import CesgaRegistration
from .registration_views import ProductsAndRegister, StaffOnly
from .views import CesgaView, Clusters, _dn


class Services(ProductsAndRegister):
    def get_permissions(self):
        if self.request.method == "POST":  # POST /services registers, as in CESGA's paas
            return [StaffOnly()]
        return [IsAuthenticated()]

    def get(self, request: Request) -> Response:
        names = sorted({v.product.name for v in launchable_versions()})
        # paas answers "services"; the web UI of the same project reads "products".
        return Response({"services": names, "products": names})

    def delete(self, request: Request) -> Response:
        """The web UI's DELETE /services?type=<kind>&name=<service>&id=<instance id>."""
        name, ident = request.query_params.get("name"), request.query_params.get("id", "")
        if not name or not ident.isdigit() or len(ident) > 18:
            raise ApiError(400, "invalid", "give the instance as ?name=<service>&id=<instance id>")
        cluster = (
            visible_clusters(request.user)
            .filter(id=int(ident), version__product__name__iexact=name)
            .first()
        )
        if cluster is None:
            raise Http404(f"no instance {ident} of {name}")
        request_destroy(cluster.id, actor=request.user)
        return Response({"result": "success"})


class Service(CesgaView):
    def version(self, name: str, version: str):
        found = find_version(name, version)
        if found is None:
            raise Http404(f"no service {name} {version}")
        return found

    def get(self, request: Request, name: str, version: str) -> Response:
        found = self.version(name, version)
        described = describe(found)
        registration = CesgaRegistration.objects.filter(version=found).first()
        return Response(
            {
                "name": found.product.name,
                "version": found.version,
                "title": found.product.title,
                "description": found.description or found.product.description,
                "logo_url": registration.logo_url if registration else "",
                "image": found.image,
                "disk_kind": found.disk_kind,
                "options": {key: described[key] for key in (*SECTIONS, "descriptions")},
            }
        )

    def post(self, request: Request, name: str, version: str) -> Response:
        """Launch; answers the new instance's path, as paas does (201 here: it is created)."""

        def launch() -> Response:
            cluster = launch_from_body(request.user, self.version(name, version), request.data)
            location = request.build_absolute_uri(
                reverse("cesga:instance", args=_instance_args(cluster))
            )
            return Response(
                _dn(cluster), status=status.HTTP_201_CREATED, headers={"Location": location}
            )

        return idempotency.once(request, launch)


def _instance_args(cluster: Cluster) -> list:
    version = cluster.version
    return [cluster.owner.username, version.product.name, version.version, cluster.id]


class Instances(Clusters):
    """paas lists instances under "instances"; the web UI reads "clusters": both, the same."""

    def get(self, request: Request, **names: str) -> Response:
        response = super().get(request, **names)
        response.data = {"instances": response.data["clusters"], **response.data}
        return response
