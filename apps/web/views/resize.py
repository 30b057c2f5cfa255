"""The cluster page's resize form: its live preview of the difference (the quota it would use
on top, whether the nodes have room now, or why it cannot be done) and the request; and its
notebook (a grow of the notebook role): the state, or the button adding one with its quota."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.requests import signed_in_user
from apps.clusters import autoscale, notebook, resize, services, vertical
from apps.clusters.models import Cluster
from apps.clusters.preview import LaunchPreview, capacity_fit, quota_usage
from apps.clusters.quotas import QuotaExceeded
from apps.usage import growth

from .mine import my_clusters

WORKERS = forms.IntegerField(min_value=0, max_value=10_000)


def resize_form(cluster: Cluster) -> dict:
    """What the page's form needs: the role, its bounds and size now, or why it cannot be
    resized; while a shrink runs, what happens to the leaving members (the plugin's words);
    empty for a cluster in any other state."""
    if cluster.state == Cluster.State.RESIZING:
        return {"draining": resize.draining(cluster)}
    if cluster.state != Cluster.State.RUNNING:
        return {}
    try:
        scaling = resize.scaling_of(cluster)
    except resize.ResizeRefused as refused:
        return {"refused": str(refused)}
    current = sum(1 for i in cluster.instances.all() if i.role == scaling.role and i.active)
    return {"scaling": scaling, "current": current}


def instance_sizes(cluster: Cluster) -> list[dict]:
    """The page's instance-size form: each role of a running cluster with its instances'
    cores and memory now and the version's bounds for them."""
    if cluster.state != Cluster.State.RUNNING:
        return []
    roles: dict[str, dict] = {}
    for instance in cluster.instances.all():
        if not instance.active or instance.role in roles:
            continue
        try:
            bounds = [vertical.bounds_of(cluster, instance.role, r) for r in ("cores", "memory_mb")]
        except resize.ResizeRefused:  # a role its version no longer defines
            continue
        roles[instance.role] = {
            "role": instance.role,
            "cores": instance.cores,
            "memory_mb": instance.memory_mb,
            "cores_bounds": bounds[0],
            "memory_bounds": bounds[1],
        }
    return list(roles.values())


def notebook_form(cluster: Cluster) -> dict:
    """The page's notebook area: its state when the cluster has one; else, for a Spark
    cluster, what adding one takes (the owner's quota on top, room now) or why it cannot be."""
    state = notebook.state_of(cluster)
    if (state is not None and state.state != "failed") or not notebook.offers_notebook(cluster):
        return {"state": state}
    form: dict = {"state": state}
    try:
        grow = notebook.plan(cluster)
    except notebook.NotebookRefused as refused:
        form["refused"] = str(refused)
    else:
        form["plan"] = grow
        form["preview"] = LaunchPreview(
            quota_usage(cluster.owner, grow.demand), capacity_fit(grow.added), grow.demand
        )
    return form


@login_required
@require_POST
def cluster_notebook(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    try:
        growth.request_notebook(cluster.id, actor=request.user)
    except (notebook.NotebookRefused, QuotaExceeded, services.StateConflict) as refused:
        messages.error(request, f"Cannot add a notebook: {refused}")
    else:
        messages.success(request, "Adding a notebook: follow it in the events below.")
    return redirect("web:cluster", cluster_id=cluster.id)


@login_required
@require_GET
def cluster_resize_preview(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(
        my_clusters(request).select_related("version__product", "revision"), id=cluster_id
    )
    context: dict = {"cluster": cluster}
    try:
        plan = resize.plan(cluster, WORKERS.clean(request.GET.get("workers", "")))
    except forms.ValidationError as error:
        why = " ".join(error.messages)
        context["problem"] = f"Give the new size as a whole number ({why})"
    except resize.ResizeRefused as refused:
        context["problem"] = str(refused)
    else:
        context["plan"] = plan
        context["drain_words"] = resize.drain_words(cluster, plan.role)
        if plan.grows:
            user = signed_in_user(request)
            context["preview"] = LaunchPreview(
                quota_usage(user, plan.demand), capacity_fit(plan.added), plan.demand
            )
    return render(request, "web/partials/cluster_resize_preview.html", context)


@login_required
@require_POST
def cluster_resize(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    try:
        workers = WORKERS.clean(request.POST.get("workers", ""))
        growth.request_resize(cluster.id, workers, actor=request.user)
    except forms.ValidationError as error:
        messages.error(request, f"Give the new size as a whole number ({' '.join(error.messages)})")
    except (resize.ResizeRefused, QuotaExceeded, services.StateConflict) as refused:
        messages.error(request, f"Cannot resize: {refused}")
    else:
        messages.success(request, f"Resizing to {workers}: follow it in the events below.")
    return redirect("web:cluster", cluster_id=cluster.id)


def _asked_figures(data) -> tuple[str, int | None, int | None]:
    """The role and the new cores and memory (blank: unchanged) a form asks for."""
    figures = []
    for name in ("cores", "memory_mb"):
        raw = (data.get(name) or "").strip()
        figures.append(FIGURE.clean(raw) if raw else None)
    return data.get("role", ""), figures[0], figures[1]


FIGURE = forms.IntegerField(min_value=1, max_value=10_000_000)


@login_required
@require_GET
def cluster_reshape_preview(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """What new cores or memory for a role mean: how they are applied (live, or restarts one
    at a time), the owner's quota with what they add, and whether each node has room."""
    cluster = get_object_or_404(
        my_clusters(request).select_related("version__product", "revision"), id=cluster_id
    )
    context: dict = {"cluster": cluster}
    try:
        change = vertical.plan(cluster, *_asked_figures(request.GET))
    except forms.ValidationError as error:
        context["problem"] = f"Give cores and memory as whole numbers ({' '.join(error.messages)})"
    except resize.ResizeRefused as refused:
        context["problem"] = str(refused)
    else:
        context["change"] = change
        context["shortage"] = vertical.shortage(change)
        if change.grows:
            scopes = quota_usage(signed_in_user(request), change.demand)
            context["preview"] = LaunchPreview(scopes, None, change.demand)
    return render(request, "web/partials/cluster_reshape_preview.html", context)


@login_required
@require_POST
def cluster_reshape(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    try:
        role, cores, memory_mb = _asked_figures(request.POST)
        growth.request_vertical_resize(cluster.id, role, cores, memory_mb, actor=request.user)
    except forms.ValidationError as error:
        messages.error(
            request, f"Give cores and memory as whole numbers ({' '.join(error.messages)})"
        )
    except (resize.ResizeRefused, QuotaExceeded, services.StateConflict) as refused:
        messages.error(request, f"Cannot resize: {refused}")
    else:
        messages.success(
            request, f"Changing the {role}s' cores and memory: follow it in the events below."
        )
    return redirect("web:cluster", cluster_id=cluster.id)


def autoscaling_form(cluster: Cluster) -> dict:
    """The page's autoscaling area: the policy and its last decision, and whether this
    cluster's product reports the pending work a policy needs (its size role's bounds)."""
    policy = autoscale.policy_of(cluster)
    try:
        scaling = resize.scaling_of(cluster)
    except resize.ResizeRefused:
        scaling = None
    from apps.products.registry import plugin_for

    offered = scaling is not None and plugin_for(cluster.definition).load_command is not None
    return {"policy": policy, "scaling": scaling, "offered": offered}


AUTOSCALING_FIELDS = {
    "min_workers": forms.IntegerField(min_value=0),
    "max_workers": forms.IntegerField(min_value=0),
    "cooldown_seconds": forms.IntegerField(min_value=1, required=False),
    "scale_up_factor": forms.FloatField(min_value=0, max_value=1, required=False),
    "scale_down_factor": forms.FloatField(min_value=0, max_value=1, required=False),
    "min_change": forms.IntegerField(min_value=1, required=False),
    "decommission_timeout_seconds": forms.IntegerField(min_value=0, required=False),
}


@login_required
@require_POST
def cluster_autoscaling(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Set the cluster's policy from the form, or take it away ("off")."""
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    if request.POST.get("off"):
        autoscale.remove_policy(cluster.id, actor=request.user)
        messages.success(request, "Autoscaling is off: the cluster keeps its size.")
        return redirect("web:cluster", cluster_id=cluster.id)
    given = {}
    try:
        for name, field in AUTOSCALING_FIELDS.items():
            value = field.clean(request.POST.get(name, "").strip() or None)
            if value is not None:
                given[name] = value
        autoscale.set_policy(cluster.id, given, actor=request.user)
    except forms.ValidationError as error:
        messages.error(request, f"Cannot set autoscaling: {name}: {' '.join(error.messages)}")
    except autoscale.PolicyRefused as refused:
        messages.error(request, f"Cannot set autoscaling: {refused}")
    else:
        messages.success(request, "Autoscaling set: the first decision comes one cooldown on.")
    return redirect("web:cluster", cluster_id=cluster.id)
