"""Personal tokens in the browser: list, create (the secret is shown once), revoke."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.requests import signed_in_user

from .forms import TokenForm
from .models import ApiToken
from .services import issue_token, revoke


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None)
    issued = None
    if request.method == "POST" and form.is_valid():
        issued = issue_token(
            request.user,
            form.cleaned_data["name"],
            form.cleaned_data["expires_in_days"],
            read_only=form.cleaned_data["read_only"],
            actor=request.user,
        )
        form = TokenForm()
    tokens = ApiToken.objects.filter(user=signed_in_user(request))
    return render(request, "tokens/tokens.html", {"form": form, "issued": issued, "tokens": tokens})


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, id=token_id, user=request.user)
    revoke(token.id, actor=request.user)
    return redirect("tokens:list")
