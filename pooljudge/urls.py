from django.contrib import admin
from django.urls import include, path

from pooljudge import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("accounts.urls")),
    path("admin/", admin.site.urls),
    path("c/", include("campaigns.urls")),
    path("c/", include("pooling.urls")),
    path("c/", include("assess.urls")),
    path("c/", include("qrels.urls")),
]

handler500 = "pooljudge.views.server_error"
