from celery import shared_task

from campaigns.imports import run_import_job
from campaigns.jobs import run_job
from campaigns.models import Job
from pooling.imports import documents_importer, runs_importer
from pooling.models import Pool
from pooling.pools import BUILD_TASK, build_pool, mark_failed


@shared_task(bind=True)
def import_runs_task(self, job_id: int) -> None:
    run_job(self, job_id, lambda job, progress: run_import_job(job, progress, runs_importer))


@shared_task(bind=True)
def import_documents_task(self, job_id: int) -> None:
    run_job(self, job_id, lambda job, progress: run_import_job(job, progress, documents_importer))


def _build(job, progress):
    pool = Pool.objects.get(pk=job.params["pool"])
    return build_pool(
        pool=pool,
        progress=lambda done, total, message: progress.update(done, total=total, message=message),
    )


@shared_task(bind=True, name=BUILD_TASK)
def build_pool_task(self, job_id: int) -> None:
    run_job(self, job_id, _build)
    job = Job.objects.filter(pk=job_id).first()
    if job is not None and job.status in (Job.Status.FAILED, Job.Status.CANCELLED):
        mark_failed(
            job.params["pool"],
            Pool.Status.FAILED if job.status == Job.Status.FAILED else Pool.Status.CANCELLED,
        )
