"""Pooljudge settings, read from the environment (see README "Configuration").

Embedded default (no variables set): SQLite under ``var/``, Celery tasks run eagerly in the web
process, DEBUG on, bound to localhost. Production: DATABASE_URL (PostgreSQL), REDIS_URL or
CELERY_BROKER_URL, SECRET_KEY, ALLOWED_HOSTS, DEBUG=0.
"""

from __future__ import annotations

from pathlib import Path

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from pooljudge.env import (
    data_dir,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = data_dir(BASE_DIR)

DATABASE_URL = env_str("DATABASE_URL")
EMBEDDED = DATABASE_URL is None

# Debug defaults to on only for the embedded laptop setup; any configured database means a
# deployment, where it must be asked for explicitly.
DEBUG = env_bool("DEBUG", EMBEDDED)

SECRET_KEY = env_str("SECRET_KEY")
if SECRET_KEY is None:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "django-insecure-embedded-development-key-do-not-deploy"  # noqa: S105

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # Django's admin, with the throttled login form (accounts/admin.py).
    "accounts.apps.PooljudgeAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "accounts",
    "campaigns",
    "pooling",
    "assess",
    "qrels",
    # The project package itself, for commands that span the apps (`manage.py demo`).
    "pooljudge",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "pooljudge.middleware.SessionLifetimeMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "pooljudge.middleware.PrivatePagesMiddleware",
    "accounts.middleware.PasswordChangeRequiredMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "pooljudge.urls"
WSGI_APPLICATION = "pooljudge.wsgi.application"
ASGI_APPLICATION = "pooljudge.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "campaigns.context_processors.site",
            ],
            # {% partialdef %} everywhere without a {% load %} (it is built into Django 6).
            "builtins": ["template_partials.templatetags.partials"],
        },
    }
]

CONN_MAX_AGE = env_int("CONN_MAX_AGE", 600)
if DATABASE_URL:
    DATABASES = {"default": database_from_url(DATABASE_URL, conn_max_age=CONN_MAX_AGE)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "pooljudge.sqlite3",
            # IMMEDIATE transactions: the embedded server's writers queue for the lock instead of
            # failing with "database is locked" when a read transaction tries to upgrade.
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# Django's backend, refusing throttled usernames and addresses before any password is checked.
AUTHENTICATION_BACKENDS = ["accounts.backends.ThrottledModelBackend"]

# Login throttling (accounts/throttle.py, docs/security.md): this many failed logins within the
# window lock a username, or a client address, until the window holds fewer again. Counted in the
# database, so every web process and machine shares the counts.
LOGIN_FAILURES_PER_ACCOUNT = env_int("LOGIN_FAILURES_PER_ACCOUNT", 5)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 50)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("LOGIN_FAILURE_WINDOW_SECONDS", 15 * 60)
if LOGIN_FAILURE_WINDOW_SECONDS <= 0:
    raise ImproperlyConfigured("LOGIN_FAILURE_WINDOW_SECONDS must be positive")

# One-time password links (an organiser's hand-over link, the reset e-mail) work once and for
# this long.
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_SECONDS", 3 * 24 * 3600)
# The site's address for links printed by commands (`add_member --create` without --password,
# `reset_link`), which have no request to take it from; pages use the request's.
SITE_URL = env_str("SITE_URL")

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Hashed names so assessors never run a stale script after an upgrade; compressed so the
        # judging page stays light.
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
MEDIA_ROOT = DATA_DIR / "media"

# Uploads: files stream to disk above this size instead of memory, and are stored in the
# database chunk by chunk (campaigns/uploads.py). UploadLimits counts files and bytes while a
# request streams in and stops it at the first limit passed, with a message the page shows;
# Django's own file-count limit (a bare "Bad Request (400)") is set just above it as a backstop.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
POOLJUDGE_MAX_UPLOAD_BYTES = env_int("POOLJUDGE_MAX_UPLOAD_BYTES", 1024 * 1024 * 1024)
POOLJUDGE_MAX_UPLOAD_TOTAL_BYTES = env_int("POOLJUDGE_MAX_UPLOAD_TOTAL_BYTES", 4 * 1024**3)
POOLJUDGE_MAX_UPLOAD_FILES = env_int("POOLJUDGE_MAX_UPLOAD_FILES", 1000)
DATA_UPLOAD_MAX_NUMBER_FILES = POOLJUDGE_MAX_UPLOAD_FILES + 1
FILE_UPLOAD_HANDLERS = [
    "campaigns.uploads.UploadLimits",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# The bytes of an upload whose import failed or was cancelled are kept this long for a retry,
# then deleted (by every worker once an hour, on every new upload, and `manage.py purge_uploads`).
POOLJUDGE_UPLOAD_RETENTION_HOURS = env_float("POOLJUDGE_UPLOAD_RETENTION_HOURS", 7 * 24.0)
# Decompressed bytes allowed per compressed byte, against gzip bombs.
POOLJUDGE_MAX_GZIP_RATIO = env_int("POOLJUDGE_MAX_GZIP_RATIO", 200)

# E-mail: only with EMAIL_HOST set can the site send reset links itself; without it, people get a
# one-time link from an organiser (or an administrator's `manage.py reset_link`).
EMAIL_HOST = env_str("EMAIL_HOST")
PASSWORD_RESET_BY_EMAIL = EMAIL_HOST is not None
if EMAIL_HOST is not None:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", 587)
    EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", EMAIL_PORT == 587)
    EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", EMAIL_PORT == 465)
    EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
else:
    EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "pooljudge@localhost")

# --- Security -----------------------------------------------------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Django's database sessions, read without the ORM's per-request query compilation.
SESSION_ENGINE = "pooljudge.sessions"
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# Idle timeout: a session unused for this long must log in again. Active sessions are extended
# at most every SESSION_REFRESH_SECONDS (pooljudge/middleware.py), not written on every request.
SESSION_COOKIE_AGE = env_int("SESSION_IDLE_SECONDS", 8 * 3600)
SESSION_REFRESH_SECONDS = env_int("SESSION_REFRESH_SECONDS", 300)
SESSION_SAVE_EVERY_REQUEST = False
# Absolute lifetime: however active, a login ends this long after it began (12 hours: NIST SP
# 800-63B's reauthentication interval at AAL2; an assessor logs in once a working day).
SESSION_ABSOLUTE_SECONDS = env_int("SESSION_ABSOLUTE_SECONDS", 12 * 3600)
if SESSION_ABSOLUTE_SECONDS <= 0:
    raise ImproperlyConfigured("SESSION_ABSOLUTE_SECONDS must be positive")
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    if env_bool("BEHIND_TLS_PROXY", True):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
# Proxies in front of the application that append the client's address to X-Forwarded-For: the
# login throttle counts the address the outermost of them saw. 0 means REMOTE_ADDR is the
# client (the embedded server, or gunicorn exposed directly).
TRUSTED_PROXY_COUNT = env_int(
    "TRUSTED_PROXY_COUNT",
    1 if not DEBUG and env_bool("BEHIND_TLS_PROXY", True) else 0,
)

# No inline scripts or styles anywhere; documents are untrusted HTML.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "frame-src": [NONE],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# --- Celery -------------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
# No broker: tasks run eagerly in the process that enqueues them (the embedded default); the
# in-memory transport is named only so that Celery never goes looking for a server.
CELERY_TASK_ALWAYS_EAGER = env_str("CELERY_BROKER_URL", REDIS_URL) is None
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL) or "memory://localhost/"
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "pooljudge")
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_TIMEOUT = 5
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": env_int("CELERY_UNACKED_RESTORE_THROTTLE", 10),
}
# A task must end (or be killed) before Redis would hand its message to another worker.
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", int(CELERY_VISIBILITY_TIMEOUT * 0.9))
# The soft limit leaves the task time to roll back; never negative, which Celery would read as
# a hard limit of its own default instead of ours.
CELERY_TASK_SOFT_TIME_LIMIT = max(1, CELERY_TASK_TIME_LIMIT - min(30, CELERY_TASK_TIME_LIMIT // 4))
if CELERY_TASK_TIME_LIMIT >= CELERY_VISIBILITY_TIMEOUT:
    raise ImproperlyConfigured("CELERY_TASK_TIME_LIMIT must be below CELERY_VISIBILITY_TIMEOUT")

# Job table: a running job whose heartbeat is older than this is presumed abandoned by a dead
# worker and may be claimed again; after JOB_MAX_ATTEMPTS claims it fails for good.
JOB_HEARTBEAT_SECONDS = env_float("JOB_HEARTBEAT_SECONDS", 5.0)
JOB_STALE_AFTER_SECONDS = env_float("JOB_STALE_AFTER_SECONDS", 60.0)
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3)
# The environment variables a model configuration may name for its API key. An allowlist: the
# worker sends the named variable's value to the configured endpoint, so an organiser must not
# be able to name SECRET_KEY or DATABASE_URL and point the endpoint at their own server.
MODEL_API_KEY_VARIABLES = env_list("MODEL_API_KEY_VARIABLES", ["OPENAI_API_KEY"])
# A model judging a pool stops sending after this long and hands the rest to a follow-up job,
# well inside the task's time limit (assess/model_judging.py).
MODEL_JOB_SLICE_SECONDS = env_float(
    "MODEL_JOB_SLICE_SECONDS", max(1.0, CELERY_TASK_SOFT_TIME_LIMIT * 0.8)
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
