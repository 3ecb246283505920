from django.urls import path

from qrels.views import (
    adjudication,
    agreement,
    documents,
    evaluation,
    export,
    pool_bias,
    reports,
    stability,
)

app_name = "qrels"

urlpatterns = [
    path("<slug:slug>/export/", export.export_page, name="export"),
    path("<slug:slug>/export/<int:pk>/download/", export.export_download, name="export_download"),
    path("<slug:slug>/export/<int:pk>/readme/", export.export_readme, name="export_readme"),
    path("<slug:slug>/reports/", reports.reports_index, name="reports"),
    path("<slug:slug>/reports/agreement/", agreement.agreement_page, name="agreement"),
    path(
        "<slug:slug>/reports/agreement/<int:a>/<int:b>/",
        agreement.agreement_pair,
        name="agreement_pair",
    ),
    path(
        "<slug:slug>/reports/agreement/<int:a>/<int:b>/pairs/",
        agreement.agreement_pairs,
        name="agreement_pairs",
    ),
    path(
        # The document id last, as a path: ids may hold any character but whitespace.
        "<slug:slug>/reports/adjudicate/<int:topic>/<path:doc>",
        adjudication.adjudicate_pair,
        name="adjudicate",
    ),
    path(
        "<slug:slug>/reports/adjudications/",
        adjudication.adjudication_list,
        name="adjudications",
    ),
    path("<slug:slug>/documents/", documents.documents_page, name="documents"),
    # The document id last, as a path (as above).
    path("<slug:slug>/documents/<path:doc>", documents.document_page, name="document"),
    path("<slug:slug>/reports/evaluation/", evaluation.evaluation_page, name="evaluation"),
    path(
        "<slug:slug>/reports/evaluation/runs/<int:pk>/",
        evaluation.evaluation_run,
        name="evaluation_run",
    ),
    path("<slug:slug>/reports/stability/", stability.stability_page, name="stability"),
    path("<slug:slug>/reports/pool-bias/", pool_bias.pool_bias_page, name="pool_bias"),
    path(
        "<slug:slug>/reports/jobs/<int:pk>/status/",
        reports.report_job_status,
        name="report_job_status",
    ),
]
