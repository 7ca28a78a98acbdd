"""The package's folders are its layers: a module imports only its own layer and those below it
(the table in aml_retriever/__init__.py), no two modules import each other even indirectly, and
each folder says in its docstring what it holds and what it may import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "aml_retriever"
ROOT_ONLY = "__init__"  # the package root: its version, which every layer may read
# What each layer may import besides itself and the package root. Top-level modules are their own
# layer, named by the module.
ALLOWED: dict[str, set[str]] = {
    "common": set(),
    "analysis": {"common"},
    "storage": {"analysis", "common"},
    "engine": {"storage", "analysis", "common"},
    "memory": {"engine", "storage", "analysis", "common"},
    "agents": {"memory", "engine", "storage", "analysis", "common"},
    "http": {"memory", "common", "settings"},
    "cluster": {"http", "memory", "storage", "common", "settings"},
    "evaluation": {"memory", "agents", "engine", "storage", "analysis", "common"},
    "settings": {"common"},
    "progress": set(),
    "app": {"http", "memory", "storage", "common", "settings"},
    "processes": {"app", "http", "storage", "settings"},
    "cli": {"app", "processes", "cluster", "http", "agents", "memory", "storage", "analysis",
            "common", "settings", "evaluation", "progress"},
    "__main__": {"cli"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every aml_retriever module a file imports, at any depth of the file (TYPE_CHECKING too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aml_retriever"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("aml_retriever")}
    return found


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> str:
    parts = module.split(".")
    return ROOT_ONLY if len(parts) == 1 else parts[1]


def test_every_layer_imports_only_the_layers_below_it() -> None:
    wrong = []
    for module, path in sorted(MODULES.items()):
        own = layer(module)
        assert own in ALLOWED or own == ROOT_ONLY, f"{module} is in no layer of the table"
        for target in imports(path):
            other = layer(target)
            if other not in (own, ROOT_ONLY) and other not in ALLOWED.get(own, set()):
                wrong.append(f"{module} imports {target}")
    assert not wrong, wrong


def test_a_forbidden_import_is_caught(tmp_path: Path) -> None:
    """The check above can fail: a storage module that imported the engine is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from aml_retriever.engine.query import plan\n")
    assert "engine" not in ALLOWED["storage"]
    assert {layer(t) for t in imports(bad)} == {"engine"}


def cycles() -> list[list[str]]:
    graph = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    graph = {m: {t for t in ts if layer(t) != ROOT_ONLY} for m, ts in graph.items()}
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert cycles() == []


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")))
def test_each_folder_says_what_it_holds_and_may_import(folder: str) -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text())) or ""
    if folder != "evaluation":
        assert "May import" in doc, folder
    for module in (PACKAGE / folder).glob("*.py"):
        if module.stem not in ("__init__", "__main__"):
            assert f"`{module.stem}`" in doc or folder == "evaluation", (folder, module.stem)
