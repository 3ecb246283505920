from celery import shared_task

from campaigns.imports import run_import_job
from campaigns.jobs import JobFailed, run_job
from qrels.imports import qrels_importer


@shared_task(bind=True)
def import_qrels_task(self, job_id: int) -> None:
    run_job(self, job_id, lambda job, progress: run_import_job(job, progress, qrels_importer))


def _build_export(job, progress) -> dict:
    from qrels.export import ExportError, build_stored_export, use_snapshot
    from qrels.models import Export
    from qrels.policies import PolicyConflict

    # First statement of the job's transaction: every file reads one snapshot.
    use_snapshot()
    export = Export.objects.select_related("campaign").filter(pk=job.params.get("export")).first()
    if export is None:
        raise JobFailed("The export was deleted before it was built.")
    try:
        return build_stored_export(
            export=export,
            progress=lambda done, total, message: progress.update(
                done, total=total, message=message
            ),
        )
    except PolicyConflict as exc:
        count = len(exc.conflicts)
        raise JobFailed(
            f"Policy refuse: assessors disagree on {count:,} pair{'s' if count != 1 else ''}. "
            "Choose another policy, or resolve them first.",
            result={"problems": exc.lines(100), "more": max(0, count - 100)},
        ) from None
    except ExportError as exc:
        raise JobFailed(str(exc)) from None


@shared_task(bind=True)
def export_task(self, job_id: int) -> None:
    """Build an export bundle (qrels.models.Export named in the job's params) into the
    database."""
    run_job(self, job_id, _build_export)
