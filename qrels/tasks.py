from celery import shared_task

from campaigns.imports import run_import_job
from campaigns.jobs import JobFailed, run_job
from qrels.imports import qrels_importer


@shared_task(bind=True)
def import_qrels_task(self, job_id: int) -> None:
    run_job(self, job_id, lambda job, progress: run_import_job(job, progress, qrels_importer))


def _reporter(progress):
    """The (done, total, message) callback the export and report code takes, feeding the job."""
    return lambda done, total, message: progress.update(done, total=total, message=message)


def _conflicts_failed(exc, advice: str) -> JobFailed:
    """Policy ``refuse`` met disagreeing assessors: the job fails listing the first pairs."""
    count = len(exc.conflicts)
    return JobFailed(
        f"Policy refuse: assessors disagree on {count:,} pair{'s' if count != 1 else ''}. {advice}",
        result={"problems": exc.lines(100), "more": max(0, count - 100)},
    )


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
            progress=_reporter(progress),
        )
    except PolicyConflict as exc:
        raise _conflicts_failed(exc, "Choose another policy, or resolve them first.") from None
    except ExportError as exc:
        raise JobFailed(str(exc)) from None


@shared_task(bind=True)
def export_task(self, job_id: int) -> None:
    """Build an export bundle (qrels.models.Export named in the job's params) into the
    database."""
    run_job(self, job_id, _build_export)


REPORT_KIND = "report"


def _build_report(job, progress) -> dict:
    """An evaluation, ranking-stability or pool-bias report (qrels.runscores.run_report) of the
    job's campaign, from the options in its params; an uploaded qrels file is read from the
    campaign's stored uploads (params["uploads"]: option key -> upload id)."""
    import tempfile
    from pathlib import Path

    from campaigns.models import Upload
    from campaigns.textfiles import ParseError
    from campaigns.uploads import copy_upload, discard_bytes
    from qrels.policies import PolicyConflict
    from qrels.runscores import parse_upload, run_report

    params = job.params
    uploaded = {}
    upload_ids = []
    for key, pk in (params.get("uploads") or {}).items():
        upload = Upload.objects.filter(pk=pk, campaign=job.campaign).first()
        if upload is None or not upload.chunks.exists():
            raise JobFailed("The uploaded qrels file is no longer stored; upload it again.")
        progress.update(message=f"reading {upload.name}")
        try:
            with tempfile.TemporaryDirectory(prefix="pooljudge-report-") as scratch:
                uploaded[key] = parse_upload(
                    copy_upload(upload, Path(scratch) / "qrels"),
                    name=upload.name,
                    on_conflict=params.get("on_conflict") or "refuse",
                )
        except ParseError as exc:
            raise JobFailed(
                f"{upload.name} is not a qrels file trec_eval reads.",
                result={"problems": [str(p) for p in exc.problems], "more": exc.more},
            ) from None
        upload_ids.append(upload.pk)
    try:
        report = run_report(
            campaign=job.campaign,
            report=params.get("report", ""),
            options=params.get("options") or {},
            uploaded=uploaded,
            progress=_reporter(progress),
        )
    except PolicyConflict as exc:
        raise _conflicts_failed(exc, "Choose another policy.") from None
    except ValueError as exc:
        raise JobFailed(str(exc)) from None
    # The result holds everything the page shows; the uploaded bytes are not needed again.
    discard_bytes(upload_ids)
    runs = len(report.get("runs", []))
    return {"report": report, "message": f"Report ready: {runs} runs in {report['seconds']:.1f} s."}


@shared_task(bind=True)
def report_task(self, job_id: int) -> None:
    """Compute a report too big to compute while its page loads (qrels.runscores.DIRECT_LIMIT)."""
    run_job(self, job_id, _build_report)
