"""The shape of the code: no import cycle through the pooling and qrels modules (counting imports
inside functions too, which hide a cycle rather than remove it), and the shared-helpers module at
the bottom, importing no app."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("accounts", "campaigns", "pooling", "assess", "qrels", "pooljudge")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[module_name(path)] = path
    return modules


def imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports anywhere in it (``from a.b import c`` counts as
    a.b.c when that is a module, else a.b)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            if name in modules:
                found.add(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_pooling_or_qrels_module_imports_itself_back():
    modules = project_modules()
    graph = {
        name: {target for target in imports(path, modules) if target != name}
        for name, path in modules.items()
    }
    # A package's __init__ importing its own modules is not a cycle worth counting.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    # campaigns.jobs <-> pooljudge.celery (the worker heartbeat) and campaigns.models ->
    # campaigns.jobs -> campaigns.uploads -> campaigns.models remain, inside functions, outside
    # this scope (issue 17 removed pooling.pools <-> pooling.tasks).
    found = [c for c in cycles(graph) if any(m.startswith(("pooling", "qrels")) for m in c)]
    assert found == []


def test_the_shared_helpers_import_no_app():
    modules = project_modules()
    assert imports(ROOT / "pooljudge" / "common.py", modules) == set()
