"""Products and versions users can launch (filled in by the scheduler-core issue)."""
