from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("clusters/<int:cluster_id>/jobs", views.cluster_jobs, name="cluster-jobs"),
    path("jobs/<int:job_id>/", views.job_detail, name="job"),
    path("jobs/<int:job_id>/log", views.job_log, name="log"),
    path("jobs/<int:job_id>/cancel", views.job_cancel, name="cancel"),
    path("jobs/<int:job_id>/outputs/<path:name>", views.job_output, name="output"),
]
