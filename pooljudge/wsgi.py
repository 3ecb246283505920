import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")
application = get_wsgi_application()
# Import every view now, not on a worker's first request: with gunicorn --preload the workers
# fork with them loaded. The views import no heavy library (no pandas, scipy or statsmodels is
# installed at all), so this costs a few MB, not the 100 MB it once did.
get_resolver().url_patterns  # noqa: B018
