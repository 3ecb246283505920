from django.urls import path

from assess import views

app_name = "assess"

urlpatterns = [
    path("<slug:slug>/judge/", views.campaign_home, name="campaign_home"),
    path("<slug:slug>/judge/<str:token>/", views.start, name="start"),
    path("<slug:slug>/judge/<str:token>/<str:item>/", views.judge, name="judge"),
]
