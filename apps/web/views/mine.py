"""The clusters every cluster page of the web app starts from (the list, the detail, resize,
notebook and who may connect)."""

from django.db.models import QuerySet
from django.http import HttpRequest

from apps.accounts.requests import signed_in_user
from apps.clusters.models import Cluster


def my_clusters(request: HttpRequest) -> QuerySet[Cluster]:
    """Only the user's own clusters: anyone else's answers 404, never 403. The access rule
    (Cluster.objects.visible_to) narrowed to the owner: these pages are self-service, so staff
    too see only their own here (everyone's through the API and the admin)."""
    user = signed_in_user(request)
    return Cluster.objects.visible_to(user).filter(owner=user).select_related("version__product")
