from django.urls import path

from campaigns import views

app_name = "campaigns"

urlpatterns = [
    path("new/", views.campaign_create, name="create"),
    path("<slug:slug>/", views.campaign_detail, name="detail"),
    path("<slug:slug>/guide/", views.campaign_guide, name="guide"),
    path("<slug:slug>/settings/", views.campaign_settings, name="settings"),
    path("<slug:slug>/rubric/", views.rubric_edit, name="rubric"),
    path("<slug:slug>/rubric/history/", views.rubric_history, name="rubric_history"),
    path("<slug:slug>/files/", views.files, name="files"),
    path("<slug:slug>/files/<slug:kind>/", views.upload, name="upload"),
    path("<slug:slug>/jobs/", views.job_list, name="jobs"),
    path("<slug:slug>/jobs/<int:pk>/", views.job_detail, name="job"),
    path("<slug:slug>/jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("<slug:slug>/jobs/<int:pk>/retry/", views.job_retry, name="job_retry"),
]
