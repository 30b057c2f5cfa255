"""Users are Django's own; quotas and API tokens arrive with the scheduler and API issues."""
