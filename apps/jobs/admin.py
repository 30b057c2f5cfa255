from django.contrib import admin

from .models import Job, JobFile


class JobFileInline(admin.TabularInline):
    model = JobFile
    readonly_fields = ("role", "name", "size")
    fields = readonly_fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Read-only: jobs change state through apps.jobs.services (the worker, a cancel)."""

    list_display = ["id", "cluster", "owner", "kind", "main", "state", "submitted", "ended"]
    list_filter = ["state", "kind"]
    search_fields = ["cluster__name", "owner__username", "main", "application_id"]
    list_select_related = ["cluster", "owner"]
    inlines = [JobFileInline]
    exclude = ["log"]
    readonly_fields = [f.name for f in Job._meta.get_fields() if f.concrete and f.name != "log"] + [
        "log_tail"
    ]

    @admin.display(description="log (its end)")
    def log_tail(self, job: Job) -> str:
        return job.log[-5000:]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
