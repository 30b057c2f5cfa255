"""The quota and SSH keys pages (everyone) and the capacity page (admins)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from apps.accounts import ssh
from apps.accounts.forms import SSHKeyForm
from apps.accounts.models import SSHKey
from apps.accounts.requests import signed_in_user
from apps.clusters.capacity import node_capacity
from apps.clusters.preview import quota_usage


@login_required
def quota(request: HttpRequest) -> HttpResponse:
    return render(request, "web/quota.html", {"scopes": quota_usage(signed_in_user(request))})


@login_required
def capacity(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("the capacity page is for administrators")
    return render(request, "web/capacity.html", {"nodes": node_capacity()})


@login_required
def ssh_keys(request: HttpRequest) -> HttpResponse:
    """List, and add (POST), the user's public SSH keys."""
    form = SSHKeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            key = ssh.add_key(request.user, data["public_key"], data["name"])
        except ssh.InvalidKey as error:
            form.add_error("public_key", str(error))
        else:
            messages.success(request, f"Added SSH key “{key.name}” ({key.fingerprint}).")
            return redirect("web:ssh_keys")
    keys = SSHKey.objects.filter(user=signed_in_user(request))
    return render(request, "web/ssh_keys.html", {"form": form, "keys": keys})


@login_required
@require_POST
def ssh_key_delete(request: HttpRequest, key_id: int) -> HttpResponse:
    try:
        ssh.delete_key(request.user, key_id)
    except SSHKey.DoesNotExist:
        raise Http404("no such SSH key") from None
    messages.success(request, "Deleted the SSH key.")
    return redirect("web:ssh_keys")
