"""The package's import graph: no module of ``python/tokpipe`` imports itself back through
others (an import loop), none imports another module's private (``_underscore``) names, and
the stages reach the Rust kernels only through ``tokpipe.pipeline.kernels``.

The graph is read from the source, not from a running interpreter: every module is parsed,
relative imports are resolved, and imports inside functions count as much as those at the top
(a lazy import still ties the two modules together). Imports under ``if TYPE_CHECKING:`` do not
count: they never run. An import of ``a.b.c`` is an edge to ``a.b.c`` alone, not to the
packages ``a`` and ``a.b`` Python also runs first, or every package would loop with its own
modules.

Private means a name, or a module on the imported path, that starts with one underscore. It may
be used inside its own module, and a private module (``writers/_files.py``) inside its own
package. ``tokpipe._core``, the compiled binding, is the one private module everyone may import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO
from tests.graphs import loops

PACKAGE = REPO / "python" / "tokpipe"
ROOT = "tokpipe"
#: The compiled extension: private by its name, public to the package by design.
BINDING = "tokpipe._core"


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported tokpipe module
    name: str | None  # the name taken from it (``from target import name``), None for a module
    line: int


def module_names(package: Path = PACKAGE, root: str = ROOT) -> dict[str, Path]:
    """Dotted name of every module of the package (a package is named by its ``__init__``)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join([root, *parts])] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(node: ast.AST):
    """Every import statement under ``node``, at any depth, except in ``if TYPE_CHECKING:``
    bodies (their ``else:`` runs, so it counts)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                if isinstance(other, (ast.Import, ast.ImportFrom)):
                    yield other
                yield from _statements(other)
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _statements(child)


def _known(dotted: str, modules: dict[str, Path | None]) -> str | None:
    """The longest prefix of ``dotted`` that is a module of the package."""
    parts = dotted.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(source: str, path: Path, modules: dict[str, Path | None]) -> list[Import]:
    """The package-internal imports of one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name, modules)
                if target is not None:
                    found.append(Import(source, alias.name if alias.name in modules else target, None, node.lineno))
            continue
        if node.level:
            # `from . import x` in a package's __init__ is relative to the package itself.
            base = source.split(".") if is_package else source.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ""
        if _known(origin, modules) is None:
            continue
        for alias in node.names:
            submodule = f"{origin}.{alias.name}"
            if submodule in modules:
                found.append(Import(source, submodule, None, node.lineno))
            else:
                found.append(Import(source, _known(origin, modules) or origin, alias.name, node.lineno))
    return found


def import_graph(package: Path = PACKAGE, root: str = ROOT, binding: str = BINDING) -> list[Import]:
    modules = module_names(package, root)
    # The compiled binding is a module too (an .so, no source): `from tokpipe import _core`
    # imports it, not a name of the package.
    known: dict[str, Path | None] = {**modules, binding: None}
    return [imp for name, path in modules.items() for imp in imports_of(name, path, known)
            if imp.target != imp.source]


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (each holds a loop)."""
    return loops((e.source, e.target) for e in edges)


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_imports(edges: list[Import], binding: str = BINDING) -> list[Import]:
    """Imports of a private name, or through a private module outside its own package."""
    bad = []
    for e in edges:
        if e.target == binding and e.name is None:
            continue
        if e.name is not None and _private(e.name) and e.target != binding:
            bad.append(e)
            continue
        parts = e.target.split(".")
        for i, part in enumerate(parts):
            if _private(part) and ".".join(parts[: i + 1]) != binding:
                owner = ".".join(parts[:i])
                if not (e.source == owner or e.source.startswith(owner + ".")):
                    bad.append(e)
                break
    return bad


def _describe_cycle(component: list[str], edges: list[Import]) -> str:
    inside = set(component)
    lines = [f"{e.source}:{e.line} -> {e.target}" for e in edges if e.source in inside and e.target in inside]
    return "import loop among " + ", ".join(component) + "\n    " + "\n    ".join(sorted(set(lines)))


def test_the_package_has_no_import_loop() -> None:
    edges = import_graph()
    found = cycles(edges)
    assert not found, "\n".join(_describe_cycle(c, edges) for c in found)


def test_no_module_imports_another_modules_private_names() -> None:
    bad = private_imports(import_graph())
    assert not bad, "\n".join(f"{e.source}:{e.line} imports {e.target}" + (f".{e.name}" if e.name else "")
                              for e in bad)


#: The one module of the pipeline that calls the Rust kernels (``tokpipe._core``) for stages.
KERNEL_GATE = "tokpipe.pipeline.kernels"


def test_stages_reach_the_kernels_only_through_the_gate() -> None:
    bad = [e for e in import_graph() if e.target == BINDING and e.source.startswith("tokpipe.pipeline.stages")]
    assert not bad, f"call {KERNEL_GATE} instead:\n" + "\n".join(f"{e.source}:{e.line}" for e in bad)


# -- the checker itself, on small packages written here ---------------------------------------

def _package(tmp: Path, files: dict[str, str]) -> Path:
    root = tmp / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_checker_finds_a_loop_through_a_function_level_relative_import(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg.sub import b\n",
        "sub/__init__.py": "",
        "sub/b.py": "def f():\n    from ..a import thing\n",
    })
    assert cycles(import_graph(root, "pkg")) == [["pkg.a", "pkg.sub.b"]]


def test_checker_ignores_type_checking_imports_and_parent_packages(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "from pkg.a import x\n",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import y\nx = 1\n",
        "b.py": "import pkg.a\n",
    })
    assert cycles(import_graph(root, "pkg")) == []


def test_checker_finds_private_names_but_not_a_private_module_in_its_own_package(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg.b import _hidden, public\nfrom pkg import _core\n",
        "b.py": "",
        "_core.py": "",
        "w/__init__.py": "from pkg.w._files import f\n",
        "w/_files.py": "",
        "w/x.py": "from ._files import f\n",
        "c.py": "from pkg.w._files import f\nfrom . import _helpers\n",
        "_helpers.py": "",
    })
    bad = private_imports(import_graph(root, "pkg", "pkg._core"), binding="pkg._core")
    # pkg._helpers is private to pkg, whose modules c and a both are.
    assert sorted((e.source, e.target, e.name) for e in bad) == [
        ("pkg.a", "pkg.b", "_hidden"),
        ("pkg.c", "pkg.w._files", "f"),
    ]
