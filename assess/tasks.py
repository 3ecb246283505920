from celery import shared_task

from assess.model_judging import JUDGE_TASK, judge_pool
from campaigns.jobs import run_job


@shared_task(bind=True, name=JUDGE_TASK)
def judge_with_model_task(self, job_id: int) -> None:
    """Judge a pool with a model configuration. Not one transaction: every paid call is
    committed as it is made (assess/model_judging.py), so a killed worker never pays twice."""
    run_job(self, job_id, judge_pool, atomic=False)
