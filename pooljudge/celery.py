"""The Celery application. Configuration comes from Django settings in the CELERY_ namespace."""

import os

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")

app = Celery("pooljudge")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_heartbeat = None


@worker_ready.connect
def _start_worker_heartbeat(sender=None, **kwargs) -> None:
    """Every worker says it is alive (campaigns.jobs.WorkerHeartbeat): the jobs page and
    /healthz?deep=1 tell when none is, and the worker's hourly housekeeping runs there."""
    global _heartbeat
    from campaigns.jobs import WorkerHeartbeat

    queues = sorted(sender.app.amqp.queues.consume_from) if sender is not None else []
    _heartbeat = WorkerHeartbeat(getattr(sender, "hostname", "") or "celery", queues=queues)
    _heartbeat.start()


@worker_shutdown.connect
def _stop_worker_heartbeat(**kwargs) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()
