"""The Celery application. Configuration comes from Django settings in the CELERY_ namespace."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")

app = Celery("pooljudge")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
