"""My clusters: the list with live badges, the detail with live events, the logs panel, and
the actions."""

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.requests import signed_in_user
from apps.clusters import idle, logs, queue_position, services, states
from apps.clusters.connection import connection_details
from apps.clusters.data_path import data_path, label_destinations
from apps.clusters.models import LIVE_STATES, Cluster, DiskAllocation, Instance
from apps.clusters.provisioning import launch_provisioning
from apps.jobs.services import job_kinds
from apps.nodes import NodeError
from apps.usage import growth
from portal import streams

from ..htmx import htmx_partial
from .mine import my_clusters
from .perimeter import sources_panel
from .resize import autoscaling_form, instance_sizes, notebook_form, resize_form

S = Cluster.State
# While a cluster is in one of these, its page polls for news.
MOVING = set(states.MOVING)
# States in which an instance may have a container whose log the page loads at once.
WITH_CONTAINERS = set(states.with_containers(states.Containers.HELD))
STOPPED = "The container is not running: nothing more comes."
# A page left open does not follow a log for ever: 30 minutes of 2-second polls.
FOLLOW_POLLS = 900
FOLLOW_PAUSED = "Follow paused after 30 minutes: press Show to go on."
# As the API's ExtendSerializer: finite, positive, at most a million hours.
EXTENSION_HOURS = forms.FloatField(min_value=0.001, max_value=10**6)
PAGE_SIZE = 25  # clusters per page of the list


def _detail(request: HttpRequest, cluster_id: int) -> Cluster:
    held = (
        DiskAllocation.objects.filter(active=True)
        .select_related("disk")
        .order_by("disk__mount_path")
    )
    instances = Instance.objects.select_related("node", "address").prefetch_related(
        Prefetch("allocations", queryset=held, to_attr="held")
    )
    clusters = idle.with_group_limits(
        my_clusters(request).prefetch_related(Prefetch("instances", queryset=instances))
    )
    cluster = get_object_or_404(clusters, id=cluster_id)
    label_destinations(cluster, list(cluster.instances.all()), "held")
    return cluster


class ListFilter(forms.Form):
    """Which of my clusters the list shows: by default those not destroyed."""

    SHOWN = "live"  # not destroyed: failed ones stay until destroyed, as they keep their name
    state = forms.ChoiceField(
        label="Show",
        required=False,
        choices=[(SHOWN, "Not destroyed"), ("all", "All"), *S.choices],
        error_messages={"invalid_choice": "there is no cluster state “%(value)s”"},
    )
    page = forms.CharField(required=False)  # Paginator.get_page copes with anything

    def clusters(self, clusters: QuerySet[Cluster]) -> QuerySet[Cluster]:
        state = self.cleaned_data["state"] or self.SHOWN
        if state == self.SHOWN:
            return clusters.exclude(state=S.DESTROYED)
        return clusters if state == "all" else clusters.filter(state=state)


@login_required
def cluster_list(request: HttpRequest) -> HttpResponse:
    """My clusters, filtered by state and 25 to a page; htmx polls and page links get only
    the rows (partials/cluster_rows.html), keeping the filter and the page."""
    data = request.GET.copy()
    data.setdefault("state", ListFilter.SHOWN)
    chosen = ListFilter(data)
    if chosen.is_valid():
        page = Paginator(chosen.clusters(my_clusters(request)), PAGE_SIZE).get_page(
            chosen.cleaned_data["page"]
        )
        status = 200
    else:
        page, status = Paginator(Cluster.objects.none(), PAGE_SIZE).get_page(1), 400
    state = chosen.cleaned_data.get("state") or ListFilter.SHOWN
    context = {
        "filter": chosen,
        "page": page,
        "clusters": page.object_list,
        "state": state,
        "query": urlencode({"state": state, "page": page.number}),
        "page_numbers": page.paginator.get_elided_page_range(page.number, on_ends=1),
        "has_any": page.paginator.count > 0 or my_clusters(request).exists(),
        "polling": any(c.state in MOVING for c in page.object_list),
    }
    template = "web/partials/cluster_rows.html" if htmx_partial(request) else "web/clusters.html"
    return render(request, template, context, status=status)


@login_required
def cluster_detail(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """The page; its poller's htmx requests (?state=&since=, what the page shows) get only
    what changed since (partials/cluster_live.html)."""
    cluster = _detail(request, cluster_id)
    notebook = notebook_form(cluster)
    notebook_state = notebook["state"].state if notebook["state"] else ""
    context = {
        "cluster": cluster,
        "instances": cluster.instances.all(),
        "connection": connection_details(cluster, request.user),
        # A notebook on its way also keeps the page asking: "ready" comes from the
        # reconciler's probe some seconds after the cluster is running again.
        "polling": cluster.state in MOVING or notebook_state in NOTEBOOK_ON_ITS_WAY,
        "notebook_state": notebook_state,
        "live": _live(cluster.state),
        "queue": queue_position.position(cluster),
        "provisioning": launch_provisioning(cluster),
        "idle": idle.status(cluster),
        "resize": resize_form(cluster),
        "instance_sizes": instance_sizes(cluster),
        "autoscaling": autoscaling_form(cluster),
        "notebook": notebook,
        "job_kinds": job_kinds(cluster),  # none: no Jobs section (the plugin runs no jobs)
        **sources_panel(cluster),
    }
    if not htmx_partial(request) or request.GET.get("state", "") != cluster.state:
        context["data_path"] = data_path(cluster)
    if not htmx_partial(request):
        events = list(cluster.events.all())
        context.update(
            events=events,
            cursor=max((e.id for e in events), default=0),
            has_containers=cluster.state in WITH_CONTAINERS,
            log_tail=logs.TAIL_DEFAULT,
            log_tail_max=logs.TAIL_MAX,
        )
        return render(request, "web/cluster.html", context)
    since = request.GET.get("since", "0")
    if not since.isdigit():
        return HttpResponseBadRequest("since: not an event cursor")
    shown = request.GET.get("state", "")
    events = list(cluster.events.filter(id__gt=int(since)).order_by("id"))
    context.update(
        events=events,
        cursor=events[-1].id if events else int(since),
        changed=shown != cluster.state,
        live_changed=_live(shown) != context["live"],
        notebook_changed=request.GET.get("notebook", "") != notebook_state,
    )
    return render(request, "web/partials/cluster_live.html", context)


NOTEBOOK_ON_ITS_WAY = ("adding", "starting")


def _live(state: str) -> bool:
    """Whether a cluster in this state has a lease to extend and can be destroyed."""
    return state in LIVE_STATES and state != S.DESTROYING


class LogForm(forms.Form):
    instance = forms.CharField(required=False)
    tail = forms.IntegerField(
        label="Lines",
        min_value=1,
        max_value=logs.TAIL_MAX,
        required=False,
        error_messages={"invalid": "give a whole number"},
    )
    follow = forms.BooleanField(required=False)
    more = forms.BooleanField(required=False)  # a follow poll: only lines after `after`
    after = forms.CharField(required=False)
    polls = forms.IntegerField(min_value=0, required=False)  # follow polls so far

    def clean_after(self) -> str:
        after = self.cleaned_data["after"]
        try:
            return logs.normal_cursor(after) if after else ""
        except logs.BadCursor as error:
            raise forms.ValidationError(str(error)) from None


@login_required
def cluster_logs(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """The logs panel's answers: an instance's last lines, and while following, the lines
    after a cursor every 2 s. Problems (no container yet, a bad number) are shown in the
    panel, so they come as 200s, which htmx swaps in."""
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    form = LogForm(request.GET)
    valid = form.is_valid()
    asked = form.cleaned_data
    context = {
        "cluster": cluster,
        "more": asked.get("more", False),
        "follow": asked.get("follow", False),
        "tail": asked.get("tail") or logs.TAIL_DEFAULT,
    }
    if not valid:
        return _log_answer(request, context, problem=" ".join(_problems(form)))
    try:
        source = logs.source(cluster, asked["instance"])
        # A refused node call (the user's most in flight) is a problem shown in the panel too.
        with streams.node_call(signed_in_user(request).id, "container log"):
            if context["more"]:  # everything after the cursor, however much came
                found = logs.read(source, logs.TAIL_MAX, after=asked["after"] or None)
            else:
                found = logs.read(source, context["tail"])
            alive = bool(found.entries) or not context["follow"] or logs.running(source)
    except (logs.UnknownInstance, logs.NoContainer, NodeError, streams.TooManyNodeCalls) as error:
        return _log_answer(request, context, problem=str(error))
    polls = (asked["polls"] or 0) + 1
    following = context["follow"] and alive
    ended = "" if following else STOPPED
    if following and polls > FOLLOW_POLLS:
        following, ended = False, FOLLOW_PAUSED
    return _log_answer(
        request,
        context,
        source=source,
        text=found.text(),
        following=following,
        cursor=found.cursor or asked["after"],
        ended=ended,
        polls=polls,
    )


def _problems(form: forms.Form) -> list[str]:
    return [
        f"{form[name].label}: {' '.join(str(e) for e in errors)}"
        for name, errors in form.errors.items()
    ]


def _log_answer(request: HttpRequest, context: dict, **more) -> HttpResponse:
    if more.get("problem") and context["more"]:  # following ends, saying why
        more.update(problem="", following=False, ended=more["problem"])
    return render(request, "web/partials/cluster_log_lines.html", {**context, **more})


@login_required
def cluster_destroy(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """GET asks for confirmation (and whether to keep the data); POST destroys."""
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    if request.method != "POST":
        return render(request, "web/destroy.html", {"cluster": cluster})
    keep = request.POST.get("keep_data", "yes") != "no"
    return _act(
        request,
        cluster,
        lambda: services.request_destroy(cluster.id, keep_data=keep, actor=request.user),
    )


@login_required
@require_POST
def cluster_stop(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    return _act(request, cluster, lambda: services.request_stop(cluster.id, actor=request.user))


@login_required
@require_POST
def cluster_start(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    return _act(request, cluster, lambda: growth.request_start(cluster.id, actor=request.user))


@login_required
@require_POST
def cluster_extend(request: HttpRequest, cluster_id: int) -> HttpResponse:
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    try:
        hours = EXTENSION_HOURS.clean(request.POST.get("hours", ""))
    except forms.ValidationError as error:  # nan and inf too: a float() would take them
        messages.error(request, f"Give the extension in hours, e.g. 4 ({' '.join(error.messages)})")
        return redirect("web:cluster", cluster_id=cluster.id)
    return _act(
        request, cluster, lambda: growth.extend_lease(cluster.id, hours, actor=request.user)
    )


IDLE_MINUTES = forms.IntegerField(
    min_value=idle.MIN_LIMIT_MINUTES, max_value=idle.MAX_LIMIT_MINUTES
)


@login_required
@require_POST
def cluster_idle(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Set the idle limit (minutes; empty for none of its own), or keep it running now."""
    cluster = get_object_or_404(my_clusters(request), id=cluster_id)
    if "keep_running" in request.POST:
        idle.keep_running(cluster.id)
        messages.success(request, "Kept running: the idle clock starts again now.")
        return redirect("web:cluster", cluster_id=cluster.id)
    text = request.POST.get("minutes", "").strip()
    try:
        minutes = IDLE_MINUTES.clean(text) if text else None
    except forms.ValidationError as error:
        messages.error(request, f"Give the idle limit in minutes ({' '.join(error.messages)})")
        return redirect("web:cluster", cluster_id=cluster.id)
    idle.set_limit(cluster.id, minutes)
    return redirect("web:cluster", cluster_id=cluster.id)


def _act(request: HttpRequest, cluster: Cluster, action) -> HttpResponse:
    """Run one service call; a refusal (wrong state, lease too long, past a quota or a
    group's budget) becomes a message."""
    try:
        action()
    except (
        services.StateConflict,
        services.TransitionError,
        services.LeaseError,
        services.QuotaExceeded,
    ) as exc:
        messages.error(request, str(exc))
    return redirect("web:cluster", cluster_id=cluster.id)
