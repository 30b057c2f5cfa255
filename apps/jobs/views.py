"""The Jobs section of a cluster's page (loaded into it by htmx), the submit form, and a job's
page whose log grows by htmx polling. Owners only: anyone else's cluster or job is a 404."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.requests import signed_in_user
from apps.clusters.models import Cluster
from apps.nodes import NodeError
from portal import streams

from . import downloads, results, services, ui
from .models import Job, JobFile
from .services import JobRefused, JobRequest, Upload


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (as Django's documentation shows)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        if isinstance(data, (list, tuple)):
            return [super(MultipleFileField, self).clean(d, initial) for d in data]
        return super().clean(data, initial)


class SubmitForm(forms.Form):
    kind = forms.ChoiceField(choices=Job.Kind.choices)
    main = forms.FileField(required=False, label="Program (.py or .jar)")
    main_path = forms.CharField(
        required=False, label="or a path in the master container", max_length=255
    )
    main_class = forms.CharField(required=False, max_length=255, label="Main class")
    args = forms.CharField(required=False, label="Arguments (one a line)", widget=forms.Textarea)
    py_files = MultipleFileField(required=False, label="Python modules (--py-files)")
    data_files = MultipleFileField(required=False, label="Files (--files)")
    properties = forms.CharField(
        required=False, label="Properties (key=value, one a line)", widget=forms.Textarea
    )
    output = forms.CharField(required=False, max_length=200, label="Output folder")

    def __init__(self, *args, kinds: tuple[str, ...] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The list offers only the kinds the cluster's plugin runs (a Hadoop cluster offers no
        # PySpark); any other kind still reaches services.submit, whose refusal says why.
        widget = self.fields["kind"].widget
        assert isinstance(widget, forms.Select)
        widget.choices = [(value, label) for value, label in Job.Kind.choices if value in kinds]


def _owned(request: HttpRequest) -> QuerySet[Cluster]:
    """As the web's cluster pages (apps/web/views/clusters.py my_clusters): the access rule
    narrowed to the user's own clusters, staff included."""
    user = signed_in_user(request)
    return Cluster.objects.visible_to(user).filter(owner=user)


def _cluster(request: HttpRequest, cluster_id: int) -> Cluster:
    return get_object_or_404(_owned(request).select_related("version__product"), id=cluster_id)


def _job(request: HttpRequest, job_id: int) -> Job:
    owned = Job.objects.filter(cluster__in=_owned(request)).select_related("cluster")
    return get_object_or_404(owned, id=job_id)


def _request(form: SubmitForm, request: HttpRequest) -> JobRequest:
    data = form.cleaned_data
    files = [(JobFile.Role.MAIN, f) for f in request.FILES.getlist("main")]
    files += [(JobFile.Role.PY_FILE, f) for f in request.FILES.getlist("py_files")]
    files += [(JobFile.Role.FILE, f) for f in request.FILES.getlist("data_files")]
    services.check_upload_sizes({str(f.name): f.size or 0 for _, f in files})
    properties = {}
    for line in data["properties"].splitlines():
        if line.strip():
            key, sep, value = line.strip().partition("=")
            if not sep:
                raise JobRefused(f"property {line.strip()!r}: write it key=value", "properties")
            properties[key.strip()] = value.strip()
    return JobRequest(
        kind=data["kind"],
        main=data["main_path"].strip(),
        main_class=data["main_class"].strip(),
        args=[a for a in data["args"].splitlines() if a.strip()],
        properties=properties,
        output_path=data["output"].strip(),
        uploads=[Upload(role, str(f.name), f.read()) for role, f in files],
    )


@login_required
def cluster_jobs(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """GET: the section (table and form); POST: submit, then the job's page."""
    cluster = _cluster(request, cluster_id)
    kinds = services.job_kinds(cluster)
    form = SubmitForm(request.POST or None, request.FILES or None, kinds=kinds)
    if request.method == "POST":
        if not form.is_valid():
            wrong = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
            messages.error(request, f"The job was not submitted: {wrong}")
            return redirect("web:cluster", cluster_id=cluster.id)
        try:
            job = services.submit(signed_in_user(request), cluster, _request(form, request))
        except JobRefused as error:
            messages.error(request, f"The job was not submitted: {error}")
            return redirect("web:cluster", cluster_id=cluster.id)
        return redirect("jobs:job", job_id=job.id)
    jobs = cluster.jobs.all()[:50]
    context = {"cluster": cluster, "jobs": jobs, "form": form, "kinds": kinds}
    return render(request, "jobs/cluster_jobs.html", context)


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    part = services.log_since(job, 0)
    context = {"job": job, "log": part.text, "next": part.next, "dropped": part.dropped}
    context["application_url"] = ui.application_url(job)
    status = 200
    if job.output_path and job.done and job.cluster.state == Cluster.State.RUNNING:
        try:
            with streams.node_call(signed_in_user(request).id, "job outputs"):
                context["outputs"] = results.list_outputs(job)
        except (results.NoResult, NodeError) as error:
            context["outputs_error"] = str(error)
        except streams.TooManyNodeCalls as error:  # the page, saying why it lists no outputs
            context["outputs_error"], status = str(error), 429
    context["cap"] = services.log_cap_note()
    return render(request, "jobs/job.html", context, status=status)


@login_required
def job_log(request: HttpRequest, job_id: int) -> HttpResponse:
    """What the log gained since ?since= (htmx appends it), and the next poll while it runs."""
    job = _job(request, job_id)
    since = request.GET.get("since", "0")
    part = services.log_since(job, int(since) if since.isdigit() else 0)
    context = {"job": job, "part": part, "application_url": ui.application_url(job)}
    return render(request, "jobs/log_part.html", context)


@login_required
@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    try:
        services.cancel(job.id, actor=request.user)
    except JobRefused as error:
        messages.error(request, str(error))
    return redirect("jobs:job", job_id=job.id)


@login_required
def job_output(request: HttpRequest, job_id: int, name: str) -> HttpResponseBase:
    """One file of the output, streamed and cut at JOB_RESULT_MAX_BYTES (apps.jobs.downloads);
    409 for a folder, a symbolic link or a pattern."""
    job = _job(request, job_id)
    try:
        return downloads.output_response(job, name, signed_in_user(request).id)
    except streams.TooManyNodeCalls as error:
        return HttpResponse(f"{error}\n", status=429, content_type="text/plain")
    except results.NotDownloadable as error:
        return HttpResponse(f"{error}\n", status=409, content_type="text/plain")
    except (results.NoResult, NodeError) as error:
        return HttpResponse(f"{error}\n", status=404, content_type="text/plain")
