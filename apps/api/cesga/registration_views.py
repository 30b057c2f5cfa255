"""CESGA's product registration calls, staff only (apps.api.cesga.registration has the rules).

    POST /products                               {name, version, description, logo_url}
    PUT  /products/<name>/<version>/template     the json+jinja2 template, as the body
    PUT  /products/<name>/<version>/options      {"required", "optional", "advanced", ...}
    PUT  /products/<name>/<version>/orchestrator the configuration script (stored, never run)

Bodies are read as sent, whatever their Content-Type: CESGA's scripts PUT a template with
``Content-type: application/json`` although it is not JSON until rendered, and options with
curl's default form type. Each answer tells what the version still misses and what the
conversion warned about."""

import json

from django.http import Http404
from rest_framework import status
from rest_framework.permissions import SAFE_METHODS, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog.cesga_import import RegistrationError

from ..errors import ApiError
from . import registration
from .models import CesgaRegistration
from .views import CesgaView, ProductOptions, Products


class StaffOnly(IsAdminUser):
    message = "only staff register products"


class StaffWrites(CesgaView):
    """Reads as the view allows them; writes (registration) for staff only."""

    def get_permissions(self):
        if self.request.method in SAFE_METHODS:
            return super().get_permissions()
        return [StaffOnly()]


class RegistrationView(CesgaView):
    permission_classes = [StaffOnly]


def registered(name: str, version: str) -> CesgaRegistration:
    found = registration.find(name, version)
    if found is None:
        raise Http404(f"no registered product {name} {version} (POST /products first)")
    return found


def refused(exc: Exception | str) -> ApiError:
    return ApiError(400, "invalid_registration", str(exc))


def text_body(request: Request, what: str) -> str:
    try:
        return request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise refused(f"{what}: the body is not UTF-8 text") from None


class ProductsAndRegister(StaffWrites, Products):
    def post(self, request: Request) -> Response:
        try:
            outcome = registration.register(request.user, request.data)
        except RegistrationError as exc:
            raise refused(exc) from None
        except registration.AlreadyInCatalog as exc:
            raise ApiError(409, "conflict", str(exc)) from None
        code = status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK
        return Response(outcome.as_dict(), status=code)


class Template(RegistrationView):
    def get(self, request: Request, name: str, version: str) -> Response:
        return Response({"template": registered(name, version).template})

    def put(self, request: Request, name: str, version: str) -> Response:
        found = registered(name, version)
        try:
            outcome = registration.put_template(request.user, found, text_body(request, "template"))
        except RegistrationError as exc:
            raise refused(exc) from None
        return Response(outcome.as_dict())


class Options(StaffWrites, ProductOptions):
    def put(self, request: Request, name: str, version: str) -> Response:
        found = registered(name, version)
        try:
            options = json.loads(text_body(request, "options"))
        except json.JSONDecodeError as exc:
            raise refused(f"options: not JSON ({exc.msg} at line {exc.lineno})") from None
        except ValueError as exc:  # e.g. a number of more digits than int() converts
            raise refused(f"options: {exc}") from None
        try:
            outcome = registration.put_options(request.user, found, options)
        except RegistrationError as exc:
            raise refused(exc) from None
        return Response(outcome.as_dict())


class Orchestrator(RegistrationView):
    def get(self, request: Request, name: str, version: str) -> Response:
        return Response({"orchestrator": registered(name, version).orchestrator})

    def put(self, request: Request, name: str, version: str) -> Response:
        found = registered(name, version)
        try:
            outcome = registration.put_orchestrator(found, text_body(request, "orchestrator"))
        except RegistrationError as exc:
            raise refused(exc) from None
        return Response(outcome.as_dict())
