from django.urls import path

from campaigns import views

app_name = "campaigns"

urlpatterns = [
    path("new/", views.campaign_create, name="create"),
    path("<slug:slug>/", views.campaign_detail, name="detail"),
    path("<slug:slug>/guide/", views.campaign_guide, name="guide"),
    path("<slug:slug>/rubric/", views.rubric_edit, name="rubric"),
    path("<slug:slug>/rubric/history/", views.rubric_history, name="rubric_history"),
]
