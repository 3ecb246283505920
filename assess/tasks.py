from celery import shared_task

from assess.gullibility import TASK as GULLIBILITY_TASK
from assess.gullibility import check_gullibility
from assess.model_judging import JUDGE_TASK, judge_pool
from campaigns.jobs import run_job


@shared_task(bind=True, name=JUDGE_TASK)
def judge_with_model_task(self, job_id: int) -> None:
    """Judge a pool with a model configuration. Not one transaction: every paid call is
    committed as it is made (assess/model_judging.py), so a killed worker never pays twice."""
    run_job(self, job_id, judge_pool, atomic=False)


@shared_task(bind=True, name=GULLIBILITY_TASK)
def gullibility_task(self, job_id: int) -> None:
    """A gullibility check (assess/gullibility.py): committed call by call, as a model's
    judging job is, so a killed worker never pays twice."""
    run_job(self, job_id, check_gullibility, atomic=False)
