import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")
application = get_wsgi_application()
# Import every view now (and the libraries the reports use), not on a worker's first request:
# with gunicorn --preload the workers fork with them loaded, so a cold worker on a busy small
# machine does not spend its first request's timeout importing pandas and statsmodels.
get_resolver().url_patterns  # noqa: B018
