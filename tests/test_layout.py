"""The package's layout (docs/architecture.md): layers along the data flow, imports one way,
no cycles, small modules, no module reaching into another's private names."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "grader"
# A module may import from its own layer or from a lower one (higher number = higher layer).
LAYERS = {"errors": 0, "paths": 0, "distribution": 0, "records": 0, "sandbox": 1, "trained": 1, "training": 1,
          "course": 2, "starter": 2, "outputs": 2, "grading": 3,
          "reports": 4, "exports": 4, "classroom": 4, "notebook": 4, "cli": 5, "pytest_plugin": 5,
          "__main__": 6}
# The imports against the flow, each with why: a failed otter test, and an nbgrader test cell,
# report what `mha check` would say.
UPWARD = {("grader.grading.otter_checks", "grader.reports.text"),
          ("grader.grading.nbgrader_checks", "grader.reports.text")}


def modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports(package: Path) -> dict[str, dict[str, set[str]]]:
    """Module -> {imported module of the same package -> names imported from it}, every import
    statement counted, those inside functions too."""
    known = modules(package)
    graph: dict[str, dict[str, set[str]]] = {}
    for name, (path, is_package) in known.items():
        here = name if is_package else name.rpartition(".")[0]
        edges: dict[str, set[str]] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = here.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:  # `from . import module`
                        edges.setdefault(f"{base}.{alias.name}", set())
                    elif base in known:
                        edges.setdefault(base, set()).add(alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known:
                        edges.setdefault(alias.name, set())
        edges.pop(name, None)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Every import cycle found by a depth-first walk, each as the modules along it."""
    found, state, path = [], {}, []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                found.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def layer(module: str) -> int:
    return LAYERS[module.split(".")[1]]


@pytest.fixture(scope="module")
def graph():
    return imports(PACKAGE)


class TestImportCycles:
    def test_the_grader_has_no_import_cycle(self, graph):
        """No module imports itself through others, imports inside functions included."""
        assert cycles(graph) == []

    def test_a_cycle_is_found(self, tmp_path):
        """The walk sees a cycle through a function-level relative import."""
        package = tmp_path / "pkg"
        (package / "sub").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "sub" / "__init__.py").write_text("")
        (package / "a.py").write_text("from .sub.b import thing\n")
        (package / "sub" / "b.py").write_text("def thing():\n    from .. import a\n")
        assert cycles(imports(package)) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


class TestLayers:
    def test_every_module_belongs_to_a_layer(self, graph):
        """A new folder or loose module must be placed in the layer table above (and in docs/architecture.md)."""
        assert sorted({m.split(".")[1] for m in graph if "." in m} - set(LAYERS)) == []

    def test_imports_run_downward(self, graph):
        """Top uses bottom: no module imports from a higher layer."""
        upward = [f"{m} -> {t}" for m, targets in graph.items() if "." in m
                  for t in targets if "." in t and layer(t) > layer(m) and (m, t) not in UPWARD]
        assert upward == []

    def test_every_listed_upward_import_exists(self, graph):
        """UPWARD lists only imports the package makes (a stale entry would hide nothing, and mislead)."""
        assert sorted(t for m, t in UPWARD if t not in graph.get(m, {})) == []

    def test_the_sandbox_imports_nothing_that_knows_the_answers(self, graph):
        """The trust boundary: the sandbox needs neither the assignment, the reference nor grading."""
        reached = sorted({t for m, targets in graph.items() if m.startswith("grader.sandbox")
                          for t in targets
                          if not t.startswith(("grader.sandbox", "grader.errors", "grader.paths", "grader.records"))})
        assert reached == []

    def test_no_module_imports_private_names(self, graph):
        """Helpers two modules share are public names of one module (no `from .x import _y`)."""
        private = [f"{m} imports {t}.{n}" for m, targets in graph.items() for t, names in targets.items()
                   for n in names if n.startswith("_") and not n.startswith("__")]
        assert private == []


class TestBoundary:
    def test_the_sandbox_states_its_boundary(self):
        """grader/sandbox/__init__.py opens with what crosses the boundary and what others may call."""
        doc = ast.get_docstring(ast.parse((PACKAGE / "sandbox" / "__init__.py").read_text())) or ""
        assert "crosses the boundary" in doc and "The rest of the package calls only" in doc
