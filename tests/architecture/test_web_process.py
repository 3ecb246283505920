"""The shape of what a web process loads: every URL pattern of an app in one list (no import
half-way down a urls.py), and no numerical library (numpy, pytrec_eval, ir_measures,
krippendorff, …) loaded by importing the views: a report loads them when it is computed, so a
gunicorn worker that serves only judging pages never holds them (issue 17: <= 100 MB RSS with
every URLconf loaded, bench/web_memory.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.architecture.test_import_graph import APPS, ROOT

HEAVY = ("numpy", "pytrec_eval", "ir_measures", "krippendorff", "scipy", "pandas", "statsmodels")
HEAVY += ("sklearn",)

LOAD_EVERY_URLCONF = f"""
import sys
import django
django.setup()
from django.urls import get_resolver

def load(resolver):
    for pattern in resolver.url_patterns:
        if hasattr(pattern, "url_patterns"):
            load(pattern)

load(get_resolver())
print(" ".join(sorted(name for name in {HEAVY!r} if name in sys.modules)))
"""


def view_modules() -> list[Path]:
    found = []
    for app in APPS:
        found += [ROOT / app / "views.py"] if (ROOT / app / "views.py").exists() else []
        found += sorted((ROOT / app / "views").glob("*.py"))
    return found


def top_level_imports(path: Path) -> set[str]:
    """The top-level package of every import a module runs when it is imported (its own body,
    ``if``/``try`` blocks included; not function bodies)."""
    names = set()
    pending = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.If | ast.Try):
            pending += [*node.body, *node.orelse, *getattr(node, "handlers", [])]
            pending += getattr(node, "finalbody", [])
        elif isinstance(node, ast.ExceptHandler):
            pending += node.body
    return names


def test_the_view_modules_are_found():
    names = {path.relative_to(ROOT).as_posix() for path in view_modules()}
    assert {"assess/views.py", "qrels/views/evaluation.py", "qrels/views/export.py"} <= names


def test_no_view_module_imports_a_numerical_library_at_its_top():
    offending = {
        path.relative_to(ROOT).as_posix(): sorted(top_level_imports(path) & set(HEAVY))
        for path in view_modules()
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_loading_every_urlconf_loads_no_numerical_library(tmp_path):
    """What the views import, directly or through any module they import."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pooljudge.settings",
        "POOLJUDGE_DATA_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run(
        [sys.executable, "-c", LOAD_EVERY_URLCONF],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


def urlpatterns_assignments(app: str) -> tuple[list[ast.stmt], list[int]]:
    body = ast.parse((ROOT / app / "urls.py").read_text(encoding="utf-8")).body
    return body, [i for i, node in enumerate(body) if _assigns_urlpatterns(node)]


def test_no_urls_module_imports_after_its_url_patterns_begin():
    for app in APPS:
        if not (ROOT / app / "urls.py").exists():
            continue
        body, assigned = urlpatterns_assignments(app)
        late = [
            node.lineno
            for node in body[assigned[0] :]
            if isinstance(node, ast.Import | ast.ImportFrom)
        ]
        assert late == [], f"{app}/urls.py imports after its urlpatterns begin, line {late}"


def test_every_url_of_qrels_is_in_one_list():
    _, assigned = urlpatterns_assignments("qrels")
    assert len(assigned) == 1, "qrels/urls.py adds to urlpatterns after assigning it"


def _assigns_urlpatterns(node: ast.stmt) -> bool:
    if isinstance(node, ast.Assign):
        return any(ast.unparse(target) == "urlpatterns" for target in node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return ast.unparse(node.target) == "urlpatterns"
    return False
