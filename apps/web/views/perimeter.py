"""The cluster page's "Who may connect": the owner's allow-list (apps/clusters/perimeter.py),
the site's ranges every cluster lets in, and the form that replaces the list."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.requests import signed_in_user
from apps.clusters import perimeter
from apps.clusters.models import Cluster

from ..htmx import htmx_partial
from .mine import my_clusters

PARTIAL = "web/partials/cluster_sources.html"
CLOSED = (Cluster.State.DESTROYING, Cluster.State.DESTROYED)  # set_allowed_sources refuses these


def sources_panel(cluster: Cluster, *, typed: str | None = None, problem: str = "") -> dict:
    """The panel's context: the lists, and after a refusal what was typed and why."""
    return {
        "cluster": cluster,
        "perimeter": perimeter.sources_for_display(cluster),
        "sources_typed": typed,
        "sources_problem": problem,
        "sources_editable": cluster.state not in CLOSED,
    }


@login_required
@require_POST
def cluster_sources(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Replace the allow-list with the sources typed (commas or spaces between them). htmx
    gets the panel back, with the refusal in it (a 200, which htmx swaps in); a plain form
    post gets the page with a message."""
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    typed = request.POST.get("allowed_sources", "")
    problem = ""
    try:
        perimeter.set_allowed_sources(cluster.id, typed, signed_in_user(request).username)
    except perimeter.SourceError as error:
        problem = str(error)
    if not htmx_partial(request):
        if problem:
            messages.error(request, f"Who may connect: {problem}")
        return redirect("web:cluster", cluster_id=cluster.id)
    cluster.refresh_from_db()
    panel = sources_panel(cluster, typed=typed if problem else None, problem=problem)
    return render(request, PARTIAL, panel)
