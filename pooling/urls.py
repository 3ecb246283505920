from django.urls import path

from pooling import views

app_name = "pooling"

urlpatterns = [
    path("<slug:slug>/pools/", views.pools, name="pools"),
    path("<slug:slug>/pools/build/", views.build, name="build"),
    path("<slug:slug>/pools/versions/", views.versions, name="versions"),
    path("<slug:slug>/pools/planner/", views.planner, name="planner"),
    path("<slug:slug>/pools/<int:version>/", views.pool_detail, name="pool"),
    path("<slug:slug>/pools/<int:version>/status/", views.pool_status, name="pool_status"),
    path("<slug:slug>/pools/<int:version>/adaptive/", views.adjudication, name="adjudication"),
]
