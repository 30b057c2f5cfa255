from django.contrib import admin
from django.urls import include, path

from portal import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("apps.accounts.urls")),  # sign-in with OpenID Connect
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("apps.api.urls")),
    path("bigdata/api/v1/", include("apps.api.cesga.urls")),
    path("tokens/", include("apps.tokens.urls")),
    path("", include("apps.proxy.urls")),  # /clusters/<id>/ui/...: the products' web UIs
    path("", include("apps.jobs.urls")),  # a cluster's Jobs section and the job pages
    path("", include("apps.web.urls")),
    path("", views.home, name="home"),
    path("", include("apps.health.urls")),
    path("", include("apps.exporter.urls")),  # /metrics (Prometheus)
]

# JSON 404s under /api/ and /bigdata/api/, Django's page elsewhere.
handler404 = "apps.api.views.fallback.not_found"
