from django.urls import path

from qrels import views

app_name = "qrels"

urlpatterns = [
    path("<slug:slug>/export/", views.export_page, name="export"),
    path("<slug:slug>/export/<int:pk>/download/", views.export_download, name="export_download"),
    path("<slug:slug>/export/<int:pk>/readme/", views.export_readme, name="export_readme"),
]

# The reports (qrels/reports.py): agreement, evaluation, ranking stability, pool bias.
from qrels import reports  # noqa: E402

urlpatterns += [
    path("<slug:slug>/reports/", reports.reports_index, name="reports"),
    path("<slug:slug>/reports/agreement/", reports.agreement_page, name="agreement"),
    path(
        "<slug:slug>/reports/agreement/<int:a>/<int:b>/",
        reports.agreement_pair,
        name="agreement_pair",
    ),
    path("<slug:slug>/reports/evaluation/", reports.evaluation_page, name="evaluation"),
    path(
        "<slug:slug>/reports/evaluation/runs/<int:pk>/",
        reports.evaluation_run,
        name="evaluation_run",
    ),
    path("<slug:slug>/reports/stability/", reports.stability_page, name="stability"),
    path("<slug:slug>/reports/pool-bias/", reports.pool_bias_page, name="pool_bias"),
    path(
        "<slug:slug>/reports/jobs/<int:pk>/status/",
        reports.report_job_status,
        name="report_job_status",
    ),
]
