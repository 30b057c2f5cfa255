"""My clusters: the list with live badges, the detail with live events, and the actions."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.clusters import services
from apps.clusters.models import LIVE_STATES, Cluster, DiskAllocation, Instance

from ..htmx import htmx_partial

S = Cluster.State
# While a cluster is in one of these, its page polls for news.
MOVING = {S.QUEUED, S.PLACING, S.CONFIGURING, S.STOPPING, S.DESTROYING}


def my_clusters(request: HttpRequest) -> QuerySet[Cluster]:
    """Only the user's own clusters: anyone else's answers 404, never 403."""
    return Cluster.objects.filter(owner=request.user).select_related("version__product")


def _detail(request: HttpRequest, cluster_id: int) -> Cluster:
    held = (
        DiskAllocation.objects.filter(active=True)
        .select_related("disk")
        .order_by("disk__mount_path")
    )
    instances = Instance.objects.select_related("node", "address").prefetch_related(
        Prefetch("allocations", queryset=held, to_attr="held")
    )
    clusters = my_clusters(request).prefetch_related(Prefetch("instances", queryset=instances))
    return get_object_or_404(clusters, id=cluster_id)


@login_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    clusters = list(my_clusters(request))
    context = {"clusters": clusters, "polling": any(c.state in MOVING for c in clusters)}
    template = "web/partials/cluster_rows.html" if htmx_partial(request) else "web/clusters.html"
    return render(request, template, context)


@login_required
def cluster_detail(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = _detail(request, cluster_id)
    context = {
        "cluster": cluster,
        "instances": cluster.instances.all(),
        "events": cluster.events.all(),
        "endpoints": endpoints(cluster),
        "polling": cluster.state in MOVING,
        "live": cluster.state in LIVE_STATES and cluster.state != S.DESTROYING,
    }
    template = "web/partials/cluster_live.html" if htmx_partial(request) else "web/cluster.html"
    return render(request, template, context)


def endpoints(cluster: Cluster) -> list[dict]:
    """Each published port of the version at the address of every instance of its role."""
    found = []
    for port in cluster.version.ports or []:
        for instance in cluster.instances.all():
            if instance.role != port.get("role") or instance.address is None:
                continue
            scheme, ip = port.get("scheme"), instance.address.ip
            found.append({
                "name": port.get("name", ""), "hostname": instance.hostname, "address": ip,
                "port": port["port"], "url": f"{scheme}://{ip}:{port['port']}" if scheme else "",
            })  # fmt: skip
    return found


@login_required
def cluster_destroy(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """GET asks for confirmation (and whether to keep the data); POST destroys."""
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    if request.method != "POST":
        return render(request, "web/destroy.html", {"cluster": cluster})
    keep = request.POST.get("keep_data", "yes") != "no"
    return _act(
        request, cluster,
        lambda: services.request_destroy(cluster.id, keep_data=keep, actor=request.user),
    )  # fmt: skip


@login_required
@require_POST
def cluster_stop(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    return _act(request, cluster, lambda: services.request_stop(cluster.id, actor=request.user))


@login_required
@require_POST
def cluster_start(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    return _act(request, cluster, lambda: services.request_start(cluster.id, actor=request.user))


@login_required
@require_POST
def cluster_extend(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    try:
        hours = float(request.POST.get("hours", ""))
    except ValueError:
        messages.error(request, "Give the extension in hours, e.g. 4")
        return redirect("web:cluster", cluster_id=cluster.id)
    return _act(
        request, cluster, lambda: services.extend_lease(cluster.id, hours, actor=request.user)
    )


def _act(request: HttpRequest, cluster: Cluster, action) -> HttpResponse:
    """Run one service call; a refusal (wrong state, lease too long) becomes a message."""
    try:
        action()
    except (services.StateConflict, services.TransitionError, services.LeaseError) as exc:
        messages.error(request, str(exc))
    return redirect("web:cluster", cluster_id=cluster.id)
