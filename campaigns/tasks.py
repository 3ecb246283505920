from celery import shared_task

from campaigns.imports import run_import_job, topics_importer
from campaigns.jobs import run_job


@shared_task(bind=True)
def import_topics_task(self, job_id: int) -> None:
    run_job(self, job_id, lambda job, progress: run_import_job(job, progress, topics_importer))
