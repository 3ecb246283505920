from django.urls import path

from assess import organiser, views

app_name = "assess"

urlpatterns = [
    path("<slug:slug>/judge/", views.campaign_home, name="campaign_home"),
    path("<slug:slug>/judge/<str:token>/", views.start, name="start"),
    path("<slug:slug>/judge/<str:token>/<str:item>/", views.judge, name="judge"),
]

# The organiser's workspace (assess/organiser.py): organisers of the campaign only.
urlpatterns += [
    path("<slug:slug>/assessors/", organiser.assessors, name="assessors"),
    path("<slug:slug>/assessors/create/", organiser.assessor_create, name="assessor_create"),
    path("<slug:slug>/assessors/add/", organiser.member_add, name="member_add"),
    path(
        "<slug:slug>/assessors/<int:pk>/password-link/",
        organiser.member_password_link,
        name="member_password_link",
    ),
    path(
        "<slug:slug>/assessors/pools/<int:version>/assign/",
        organiser.assign_work,
        name="assign",
    ),
    path("<slug:slug>/assessors/pools/<int:version>/move/", organiser.move_work, name="move"),
    path(
        "<slug:slug>/assessors/pools/<int:version>/rebalance/",
        organiser.rebalance_work,
        name="rebalance",
    ),
    path(
        "<slug:slug>/assessors/assignments/<int:pk>/end/",
        organiser.assignment_end,
        name="assignment_end",
    ),
    path("<slug:slug>/progress/", organiser.progress, name="progress"),
]
