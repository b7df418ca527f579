"""The layering ARCHITECTURE.md states, checked from the source (``ast``, nothing imported):
no import circle between modules, and the application layer (``diffmbs.app``: job files, model
registry, command line) is imported by nothing below it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("diffmbs", "identification")


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module → the modules it imports (``from p import m`` counts m when m is a module; a
    module's own parent packages, initialised first anyway, are left out)."""
    known = modules()
    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    edges.add(child if child in known else base)
            elif isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
        parents = {m for m in edges if name.startswith(m + ".")}
        graph[name] = {m for m in edges - parents if m in known and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_circles():
    assert cycles(import_graph()) == []


def test_nothing_below_the_application_layer_imports_it():
    graph = import_graph()
    assert "diffmbs.app._schema" in graph  # the scan sees the application layer
    importers = {
        name
        for name, edges in graph.items()
        if any(m == "diffmbs.app" or m.startswith("diffmbs.app.") for m in edges)
        and not name.startswith("diffmbs.app")
    }
    assert importers == {"diffmbs.__main__"}
