from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from django.urls import path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)
from rest_framework.routers import SimpleRouter

from .views.clusters import ClusterViewSet
from .views.inventory import DiskViewSet, NodeViewSet, QuotaViewSet
from .views.jobs import ClusterJobsView, JobViewSet
from .views.keys import SSHKeyViewSet
from .views.me import QuotaView, TokenViewSet
from .views.products import ProductViewSet, VersionView
from .views.states import StatesView
from .views.usage import UsageCsvView, UsageView

app_name = "api"

# Paths without a trailing slash, as the issue and the CESGA API spell them.
router = SimpleRouter(trailing_slash=False)
router.register("products", ProductViewSet, basename="product")
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("tokens", TokenViewSet, basename="token")
router.register("ssh-keys", SSHKeyViewSet, basename="ssh-key")
router.register("nodes", NodeViewSet, basename="node")
router.register("disks", DiskViewSet, basename="disk")
router.register("quotas", QuotaViewSet, basename="quotas")
router.register("jobs", JobViewSet, basename="job")

# The docs pages keep the portal's CSP for scripts (the Swagger UI's start-up script is served
# as a file by the split view) but their bundles set inline styles, and Redoc runs its search
# in a blob: worker: those two, on these two pages only.
docs_csp = csp_update({"style-src": [UNSAFE_INLINE], "worker-src": [SELF, "blob:"]})

LONG = "clusters/<str:username>/<str:product>/<str:version>/<int:pk>"

urlpatterns = [
    path("products/<str:product>/<str:version>", VersionView.as_view(), name="version"),
    path("quota", QuotaView.as_view(), name="quota"),
    path("states", StatesView.as_view(), name="states"),
    path("usage", UsageView.as_view(), name="usage"),
    path("usage.csv", UsageCsvView.as_view(), name="usage-csv"),
    path("clusters/<int:cluster_id>/jobs", ClusterJobsView.as_view(), name="cluster-jobs"),
    path(
        LONG,
        ClusterViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="cluster-long",
    ),
    *(
        path(f"{LONG}/{verb}", ClusterViewSet.as_view({"post": verb}), name=f"cluster-long-{verb}")
        for verb in ("stop", "start", "extend", "resize", "notebook")
    ),
    *(  # with what the action declares (the logs' renderers), as the router would
        path(
            f"{LONG}/{what}",
            ClusterViewSet.as_view({"get": what}, **getattr(ClusterViewSet, what).kwargs),
            name=f"cluster-long-{what}",
        )
        for what in ("logs", "events")
    ),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "docs/", docs_csp(SpectacularSwaggerSplitView.as_view(url_name="api:schema")), name="docs"
    ),
    path("redoc/", docs_csp(SpectacularRedocView.as_view(url_name="api:schema")), name="redoc"),
    *router.urls,
]
