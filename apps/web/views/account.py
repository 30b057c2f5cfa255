"""The quota page (everyone) and the capacity page (admins)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.clusters.preview import quota_usage
from apps.inventory.capacity import node_capacity


@login_required
def quota(request: HttpRequest) -> HttpResponse:
    return render(request, "web/quota.html", {"scopes": quota_usage(request.user)})


@login_required
def capacity(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("the capacity page is for administrators")
    return render(request, "web/capacity.html", {"nodes": node_capacity()})
