"""Clusters, instances and disk allocations (filled in by the scheduler-core issue)."""
