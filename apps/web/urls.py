from django.urls import path

from .views import account, catalog, clusters, perimeter, resize, usage

app_name = "web"

urlpatterns = [
    path("catalog/", catalog.catalog, name="catalog"),
    path("catalog/<slug:product>/<str:version>/launch", catalog.launch, name="launch"),
    path("catalog/<slug:product>/<str:version>/preview", catalog.launch_preview, name="preview"),
    path("clusters/", clusters.cluster_list, name="clusters"),
    path("clusters/<int:cluster_id>/", clusters.cluster_detail, name="cluster"),
    path("clusters/<int:cluster_id>/destroy", clusters.cluster_destroy, name="destroy"),
    path("clusters/<int:cluster_id>/stop", clusters.cluster_stop, name="stop"),
    path("clusters/<int:cluster_id>/start", clusters.cluster_start, name="start"),
    path("clusters/<int:cluster_id>/extend", clusters.cluster_extend, name="extend"),
    path("clusters/<int:cluster_id>/idle", clusters.cluster_idle, name="idle"),
    path("clusters/<int:cluster_id>/sources", perimeter.cluster_sources, name="sources"),
    path("clusters/<int:cluster_id>/resize", resize.cluster_resize, name="resize"),
    path(
        "clusters/<int:cluster_id>/resize/preview",
        resize.cluster_resize_preview,
        name="resize-preview",
    ),
    path("clusters/<int:cluster_id>/reshape", resize.cluster_reshape, name="reshape"),
    path("clusters/<int:cluster_id>/autoscaling", resize.cluster_autoscaling, name="autoscaling"),
    path(
        "clusters/<int:cluster_id>/reshape/preview",
        resize.cluster_reshape_preview,
        name="reshape-preview",
    ),
    path("clusters/<int:cluster_id>/notebook", resize.cluster_notebook, name="notebook"),
    path("clusters/<int:cluster_id>/logs", clusters.cluster_logs, name="cluster-logs"),
    path("quota/", account.quota, name="quota"),
    path("usage/", usage.usage, name="usage"),
    path("capacity/", account.capacity, name="capacity"),
    path("ssh-keys/", account.ssh_keys, name="ssh_keys"),
    path("ssh-keys/<int:key_id>/delete", account.ssh_key_delete, name="ssh_key_delete"),
]
