from django.db.models import QuerySet
from rest_framework.permissions import IsAdminUser

from apps.clusters.models import Cluster

# Staff are Platter's administrators: they see everyone's clusters and the physical pool.
IsAdmin = IsAdminUser


def visible_clusters(user) -> QuerySet[Cluster]:
    """What a user may see or act on: their own clusters; admins see all. Everything else
    answers 404, so nobody learns which ids exist."""
    clusters = Cluster.objects.all()
    return clusters if user.is_staff else clusters.filter(owner=user)
