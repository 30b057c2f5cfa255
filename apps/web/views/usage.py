"""The Usage page: what the user's clusters held (staff: everyone's), as a chart by day stacked
by product, a table by cluster and a CSV download; the figures come from apps.usage."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from apps.accounts.requests import signed_in_user
from apps.usage.budgets import budgets_for
from apps.usage.chart import core_hours_chart
from apps.usage.export import MAX_DAYS, csv_response
from apps.usage.services import grand_total, totals, usage_rows, visible_clusters


class UsageFilter(forms.Form):
    start = forms.DateField(label="From", required=False)
    end = forms.DateField(label="To", required=False)
    group = forms.CharField(label="Quota group", required=False, max_length=150)
    user = forms.CharField(label="User", required=False, max_length=150)

    @staticmethod
    def defaults() -> dict:
        today = timezone.now().date()
        return {"start": today.replace(day=1), "end": today, "group": "", "user": ""}

    def clean(self) -> dict:
        data = super().clean() or {}
        today = timezone.now().date()
        data["end"] = data.get("end") or today
        data["start"] = data.get("start") or data["end"].replace(day=1)
        if data["start"] > data["end"]:
            raise forms.ValidationError("“From” must not be after “To”.")
        if (data["end"] - data["start"]).days >= MAX_DAYS:
            raise forms.ValidationError(f"A range is at most {MAX_DAYS} days.")
        return data


@login_required
def usage(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request)
    form = UsageFilter(request.GET)  # nothing asked: this month, up to today
    valid = form.is_valid()
    data = form.cleaned_data if valid else UsageFilter.defaults()
    staff = user.is_staff
    clusters = visible_clusters(
        user,
        everyone=staff,
        username=data.get("user", "") if staff else "",
        group=data.get("group", "") if staff else "",
    )
    rows = usage_rows(clusters, data["start"], data["end"]) if valid else []
    if valid and request.GET.get("format") == "csv":
        return csv_response(rows, f"platter-usage-{data['start']}-{data['end']}.csv")
    context = {
        "form": form,
        "staff": staff,
        "start": data["start"],
        "end": data["end"],
        "chart": core_hours_chart(rows, data["start"], data["end"]),
        "by_cluster": totals(rows, "cluster"),
        "by_group": totals(rows, "group") if staff else [],
        "total": grand_total(rows),
        "csv_query": request.GET.urlencode(),
        "budgets": budgets_for(user),
    }
    return render(request, "web/usage.html", context)
