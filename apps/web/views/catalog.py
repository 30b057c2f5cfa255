"""Catalog cards, the launch form and its live quota/capacity preview."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from apps.accounts.requests import signed_in_user
from apps.catalog.images import ImageUnavailable, image_verdict, images_on_nodes
from apps.catalog.models import ProductVersion
from apps.catalog.options import OptionsError, resolve
from apps.catalog.services import launchable_versions
from apps.clusters import services
from apps.clusters.preview import preview_launch
from apps.usage import growth
from apps.usage.budgets import BudgetExceeded, budgets_for

from ..forms import LaunchForm


@login_required
def catalog(request: HttpRequest) -> HttpResponse:
    products: dict = {}
    held = images_on_nodes()
    for version in launchable_versions().order_by("product__name", "-version"):
        # For the template: a refused launch, or one that waits for its image.
        verdict = image_verdict(version, held)
        version.missing_images, version.preparing = verdict  # type: ignore[attr-defined]
        products.setdefault(version.product, []).append(version)
    return render(request, "web/catalog.html", {"products": products.items()})


def _version(product: str, version: str) -> ProductVersion:
    return get_object_or_404(launchable_versions(), product__name=product, version=version)


@login_required
def launch(request: HttpRequest, product: str, version: str) -> HttpResponse:
    chosen = _version(product, version)
    form = LaunchForm(chosen, request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            parsed = form.launch_request  # set by a valid form: the one launch parser's answer
            cluster = growth.launch(  # the quota, then the group's budget, under their locks
                request.user,
                chosen,
                form.cleaned_data["name"],
                form.options(),
                form.cleaned_data["lease"],
                form.cleaned_data["reuse_data_from"],
                actor=request.user,
                spec=parsed.spec if parsed else None,
                idle_minutes=parsed.idle_minutes if parsed else None,
                allowed_sources=parsed.allowed_sources if parsed else (),
            )
        except OptionsError as exc:
            for name, message in exc.errors.items():
                form.add_error(name if name in form.fields else None, message)
        except BudgetExceeded as exc:
            form.add_error(None, f"Over your group's budget: {exc}")
        except services.QuotaExceeded as exc:
            form.add_error(None, f"Over your quota: {exc}")
        except (ImageUnavailable, services.NeverFits) as exc:
            form.add_error(None, f"Cannot launch: {exc}")
        except services.LeaseError as exc:
            form.add_error("lease", str(exc))
        except services.ReuseError as exc:
            form.add_error("reuse_data_from", str(exc))
        except services.NameTaken as exc:
            form.add_error("name", f"You already have a cluster named {exc.name}")
        else:
            return redirect("web:cluster", cluster_id=cluster.id)
    context = {"version": chosen, "form": form, **_preview(request, form)}
    return render(request, "web/launch.html", context, status=400 if form.errors else 200)


@login_required
def launch_preview(request: HttpRequest, product: str, version: str) -> HttpResponse:
    """The partial the form refreshes as the user types (also readable on its own)."""
    form = LaunchForm(_version(product, version), request.user, request.GET)
    return render(request, "web/partials/launch_preview.html", _preview(request, form))


def _preview(request: HttpRequest, form: LaunchForm) -> dict:
    # An unbound form previews the defaults; a bound one whatever fields are valid so far.
    unavailable, preparing = image_verdict(form.version)
    missing = {"missing_images": unavailable, "preparing": preparing}
    errors: dict[str, str] = {}
    if form.is_bound:
        form.is_valid()
        # The name is not part of what is needed; bad options and disk kinds are.
        errors = {
            k: " ".join(str(e) for e in v)
            for k, v in form.errors.items()
            if k not in ("name", "__all__")
        }
    else:
        form.cleaned_data = {n: f.initial for n, f in form.fields.items()}
    try:
        spec = resolve(form.version, form.options())
    except OptionsError as exc:
        errors = {**exc.errors, **errors}
    if errors:
        # By the labels the form shows ("Cores per instance"), not the option names ("cpu").
        labelled = {(form[k].label if k in form.fields else k): v for k, v in errors.items()}
        return {"preview": None, "preview_errors": labelled, **missing}
    roles: dict[str, int] = {}
    for instance in spec.instances:
        roles[instance.role] = roles.get(instance.role, 0) + 1
    return {
        "preview": preview_launch(signed_in_user(request), spec.instances),
        "budgets": budgets_for(signed_in_user(request)),
        "spec": spec,
        "roles": roles.items(),
        **missing,
    }
