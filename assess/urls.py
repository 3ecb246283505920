from django.urls import path

from assess import flow_views, grid_views, hybrid_views, model_views, organiser, views

app_name = "assess"

urlpatterns = [
    path("<slug:slug>/judge/", views.campaign_home, name="campaign_home"),
    path("<slug:slug>/judge/<str:token>/", views.start, name="start"),
    # Before "judge": "keys" is not an item token (those are 16 characters), but would match.
    path("<slug:slug>/judge/<str:token>/keys/", flow_views.keys_page, name="keys"),
    path("<slug:slug>/judge/<str:token>/<str:item>/", views.judge, name="judge"),
]

# The assessor's flow beside the judging screen (assess/flow_views.py): the assignment's owner.
urlpatterns += [
    path(
        "<slug:slug>/judge/<str:token>/topics/<int:topic>/",
        flow_views.judged_documents,
        name="judged",
    ),
    path("<slug:slug>/judge/<str:token>/<str:item>/skip/", flow_views.skip_document, name="skip"),
    path("<slug:slug>/judge/<str:token>/<str:item>/next/", flow_views.next_document, name="next"),
]

# The organiser's workspace (assess/organiser.py): organisers of the campaign only.
urlpatterns += [
    path("<slug:slug>/assessors/", organiser.assessors, name="assessors"),
    path("<slug:slug>/assessors/create/", organiser.assessor_create, name="assessor_create"),
    path("<slug:slug>/assessors/models/", model_views.model_judges, name="model_judges"),
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
        "<slug:slug>/assessors/pools/<int:version>/hybrid/",
        hybrid_views.hybrid_budget,
        name="hybrid",
    ),
    path(
        "<slug:slug>/assessors/pools/<int:version>/rebalance/",
        organiser.rebalance_work,
        name="rebalance",
    ),
    path(
        "<slug:slug>/assessors/pools/<int:version>/grid/<int:topic>/<int:assessor>/",
        grid_views.grid_cell,
        name="grid_cell",
    ),
    path(
        "<slug:slug>/assessors/pools/<int:version>/deal/",
        grid_views.grid_deal,
        name="grid_deal",
    ),
    path(
        "<slug:slug>/assessors/pools/<int:version>/overlap/",
        grid_views.grid_overlap,
        name="grid_overlap",
    ),
    path(
        "<slug:slug>/assessors/assignments/<int:pk>/end/",
        organiser.assignment_end,
        name="assignment_end",
    ),
    path("<slug:slug>/progress/", organiser.progress, name="progress"),
    path("<slug:slug>/highlighting/", organiser.highlighting, name="highlighting"),
]
