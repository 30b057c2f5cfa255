from django.urls import path

from . import views

app_name = "cesga"

CLUSTER = "clusters/<str:username>/<str:product>/<str:version>/<int:id>"

urlpatterns = [
    path("products", views.Products.as_view(), name="products"),
    path("products/<str:name>", views.ProductVersions.as_view(), name="versions"),
    path("products/<str:name>/<str:version>", views.ProductVersion.as_view(), name="product"),
    path(
        "products/<str:name>/<str:version>/options", views.ProductOptions.as_view(), name="options"
    ),
    path("queue/<int:job>", views.Queue.as_view(), name="queue"),
    path("clusters", views.Clusters.as_view(), name="clusters"),
    path("clusters/<str:username>", views.Clusters.as_view()),
    path("clusters/<str:username>/<str:product>", views.Clusters.as_view()),
    path("clusters/<str:username>/<str:product>/<str:version>", views.Clusters.as_view()),
    path(CLUSTER, views.ClusterDetail.as_view(), name="cluster"),
    path(f"{CLUSTER}/nodes", views.ClusterNodes.as_view(), name="nodes"),
    path(f"{CLUSTER}/services", views.ClusterServices.as_view(), name="services"),
]
