from django.urls import path, re_path

from . import registration_views as registration
from . import services_views as services
from . import views

app_name = "cesga"

CLUSTER = "clusters/<str:username>/<str:product>/<str:version>/<int:id>"
INSTANCE = "instances/<str:username>/<str:product>/<str:version>/<int:id>"
PRODUCT = "products/<str:name>/<str:version>"
SERVICE = "services/<str:name>/<str:version>"

urlpatterns = [
    path("products", registration.ProductsAndRegister.as_view(), name="products"),
    path("products/<str:name>", views.ProductVersions.as_view(), name="versions"),
    path(PRODUCT, views.ProductVersion.as_view(), name="product"),
    path(f"{PRODUCT}/options", registration.Options.as_view(), name="options"),
    path(f"{PRODUCT}/template", registration.Template.as_view(), name="template"),
    path(f"{PRODUCT}/orchestrator", registration.Orchestrator.as_view(), name="orchestrator"),
    path(f"{PRODUCT}/orquestrator", registration.Orchestrator.as_view()),  # paas' spelling
    path("queue/<int:job>", views.Queue.as_view(), name="queue"),
    path("clusters", views.Clusters.as_view(), name="clusters"),
    path("clusters/<str:username>", views.Clusters.as_view()),
    path("clusters/<str:username>/<str:product>", views.Clusters.as_view()),
    path("clusters/<str:username>/<str:product>/<str:version>", views.Clusters.as_view()),
    path(CLUSTER, views.ClusterDetail.as_view(), name="cluster"),
    path(f"{CLUSTER}/nodes", views.ClusterNodes.as_view(), name="nodes"),
    path(f"{CLUSTER}/services", views.ClusterServices.as_view(), name="services"),
    # The services API of CESGA's later web UI (services_views).
    re_path(r"^services/?$", services.Services.as_view(), name="service-list"),
    path("services/<str:name>", views.ProductVersions.as_view()),
    path(SERVICE, services.Service.as_view(), name="service"),
    path(f"{SERVICE}/options", registration.Options.as_view()),
    path(f"{SERVICE}/template", registration.Template.as_view()),
    path(f"{SERVICE}/orquestrator", registration.Orchestrator.as_view()),
    path(f"{SERVICE}/orchestrator", registration.Orchestrator.as_view()),
    path("instances", services.Instances.as_view(), name="instances"),
    path("instances/<str:username>", services.Instances.as_view()),
    path("instances/<str:username>/<str:product>", services.Instances.as_view()),
    path("instances/<str:username>/<str:product>/<str:version>", services.Instances.as_view()),
    path(INSTANCE, views.ClusterDetail.as_view(), name="instance"),
    path(f"{INSTANCE}/nodes", views.ClusterNodes.as_view()),
    path(f"{INSTANCE}/services", views.ClusterServices.as_view()),
]
