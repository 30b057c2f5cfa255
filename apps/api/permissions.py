from django.db.models import QuerySet
from rest_framework.permissions import IsAdminUser

from apps.clusters.models import Cluster

# Staff are Platter's administrators: they see everyone's clusters and the physical pool.
IsAdmin = IsAdminUser


def visible_clusters(user) -> QuerySet[Cluster]:
    """What a user may see or act on (Cluster.objects.visible_to, the one rule)."""
    return Cluster.objects.visible_to(user)
