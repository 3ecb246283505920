from celery import shared_task

from campaigns.imports import run_import_job
from campaigns.jobs import run_job
from pooling.imports import documents_importer, runs_importer
from pooling.models import Pool
from pooling.pools import BUILD_TASK, build_pool


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
    """Build the pool named in the job's params; the job row records how it went (and is the
    pool's status: pooling.models.Pool.status)."""
    run_job(self, job_id, _build)
