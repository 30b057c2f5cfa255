from django.contrib.auth.models import Group
from django.db import models


class Budget(models.Model):
    """A quota group's monthly allowance of core-hours and disk-hours (optional; either may be
    left empty). A member's launch, start, extension, resize or notebook is refused once the
    group used it up this month, or would with what its leases commit (budgets.check_growth)."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="budget")
    core_hours_per_month = models.PositiveIntegerField(null=True, blank=True)
    disk_hours_per_month = models.PositiveIntegerField(
        null=True, blank=True, help_text="HDD and SSD hours together"
    )

    def __str__(self) -> str:
        return f"budget of {self.group}"


class BudgetWarning(models.Model):
    """That a group was warned of 80 % of a budget in a month: the warning goes out once."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="warnings")
    month = models.DateField(help_text="The month's first day")
    figure = models.CharField(max_length=16)  # core_h or disk_h
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "month", "figure"], name="budget_warned_once_a_month"
            )
        ]

    def __str__(self) -> str:
        return f"{self.budget}: {self.figure} warned for {self.month:%Y-%m}"
