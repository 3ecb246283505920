"""Small typed readers for configuration from the environment.

Each reader fails loudly (ImproperlyConfigured naming the variable) rather than guessing: a typo in
``DEBUG=flase`` must not silently run a production server in debug mode.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int) -> int:
    value = env_str(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    value = env_str(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = env_str(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def database_from_url(url: str, *, conn_max_age: int) -> dict:
    """Turn ``postgres://user:pass@host:port/name?sslmode=…`` or ``sqlite:///path`` into a
    Django DATABASES entry."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # sqlite:///relative/path and sqlite:////absolute/path, as SQLAlchemy spells them.
        path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path or ":memory:",
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    if scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL scheme {scheme!r} is not supported (use postgres:// or sqlite://)"
        )
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured("DATABASE_URL names no database (postgres://host/NAME)")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        # Persistent connections: a new connection per request costs about 5x throughput.
        "CONN_MAX_AGE": conn_max_age,
        # Off by default: a health check is a `SELECT 1` round trip at the start of every request
        # on a reused connection (a sixth statement on a judgment). A connection that died since
        # (a restarted server, a killed backend) fails that request's first query instead; Django
        # closes it at the end of the request, and the judging page answers 503 and re-sends the
        # same submission id (assess/views.py), so nothing is lost or stored twice.
        "CONN_HEALTH_CHECKS": env_bool("DB_HEALTH_CHECKS", False),
        "OPTIONS": {
            # psycopg 3 server-side binding: parameters travel apart from the SQL, and psycopg
            # prepares a statement it has run 5 times on the connection, so PostgreSQL stops
            # re-planning the judging round trip's statements. Behind PgBouncer in transaction
            # mode (before 1.21, or without max_prepared_statements) set DB_SERVER_SIDE_BINDING=0:
            # a prepared statement lives in one server connection, the next transaction may not.
            **_server_side_binding(env_bool("DB_SERVER_SIDE_BINDING", True)),
            **dict(parse_qsl(parts.query)),
        },
    }


def _server_side_binding(on: bool) -> dict:
    # Django turns psycopg's statement preparation off (prepare_threshold None) unless asked;
    # it only works with server-side binding, so the two go together.
    return {"server_side_binding": True, "prepare_threshold": 5} if on else {}


def data_dir(base: Path) -> Path:
    path = Path(env_str("POOLJUDGE_DATA_DIR", str(base / "var")))
    path.mkdir(parents=True, exist_ok=True)
    return path
