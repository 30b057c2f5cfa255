from django.contrib import admin

from .models import Budget, BudgetWarning


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ("group", "core_hours_per_month", "disk_hours_per_month")
    search_fields = ("group__name",)


@admin.register(BudgetWarning)
class BudgetWarningAdmin(admin.ModelAdmin):
    list_display = ("budget", "month", "figure", "at")
    list_filter = ("figure", "month")
