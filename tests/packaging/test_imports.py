"""The import graph of the ``mlip`` package: no cycles, no private names across modules, layers
point one way.

The graph is read statically (``ast``) from the source folders that pyproject.toml maps onto the
package (``mlip/``, ``models/`` → ``mlip.models``, ...), so nothing is imported and an import
inside a function counts as much as one at the top of a module. Each check is a function of a
repository root, so it can be pointed at another checkout (``python tests/packaging/test_imports.py ROOT``
prints every finding there).
"""

from __future__ import annotations

import ast
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

import tomllib

ROOT = Path(__file__).resolve().parents[2]

#: Layers from the bottom up, each a list of module-name prefixes (a module belongs to the layer of
#: its longest matching prefix). A module may import from its own layer and from the layers below.
#: Modules that do not exist (yet, or any more) are simply not matched. The kernels sit with the math
#: they accelerate; the package's own ``__init__`` is placed by :data:`PACKAGE_LAYER`.
LAYERS: List[Tuple[str, List[str]]] = [
    ("base", ["mlip.version", "mlip.io", "mlip.elements", "mlip.keys", "mlip.extras", "mlip.allocator",
              "mlip.derived_constants", "mlip.structure_checks", "mlip.run_lock", "mlip.threads",
              "mlip.import_paths",
              "mlip.kernels"]),  # the kernels' switch and CuPy loader
    ("data", ["mlip.data"]),
    ("graph", ["mlip.graph", "mlip.graph_builder", "mlip.neighbors"]),
    ("building blocks", ["mlip.nn", "mlip.so3", "mlip.kernels.escn_reference", "mlip.kernels.escn_rotation",
                         # until they move into mlip.nn
                         "mlip.radial", "mlip.scatter", "mlip.envelope_softmax", "mlip.attention_cutoff",
                         "mlip.embedded_atom"]),
    # a Potential wraps any network (reference energies, scale, declared terms); models plug into it
    ("potential", ["mlip.potential", "mlip.repulsion", "mlip.terms"]),
    ("models", ["mlip.models"]),
    ("checkpoints", ["mlip.checkpoint", "mlip.pretrained"]),
    ("calculators", ["mlip.calculators"]),
    ("training and workflows", ["mlip.training", "mlip.workflows", "mlip.integrations"]),
    ("cli and test kit", ["mlip.cli", "mlip.__main__", "mlip.workflows.discovery.cli", "mlip.testing"]),
]

#: The layer of the package itself (``import mlip``): it gathers public names up to the calculators
#: (``mlip.load_potential``, ``mlip.MLIPCalculator``), which training and workflows may use.
PACKAGE_LAYER = "calculators"

#: Imports that go up the layers on purpose: (importer, imported) → why. Keep this list tiny.
ALLOWED_UPWARD: Dict[Tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    """One imported name: ``importer`` imports ``target`` (a module of the package); ``name`` is the
    name taken from it (None for ``import target``); ``line`` in the importer's source."""

    importer: str
    target: str
    name: Optional[str]
    line: int


def package_dirs(root: Path) -> Dict[str, str]:
    """Package name → source folder (relative to ``root``), from pyproject.toml's package-dir."""
    with open(root / "pyproject.toml", "rb") as fh:
        mapping = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    return {pkg: folder for pkg, folder in mapping.items() if pkg == "mlip" or pkg.startswith("mlip.")}


def module_files(root: Path) -> Dict[str, Path]:
    """Every module of the package → its source file (packages by their ``__init__.py``)."""
    dirs = package_dirs(root)
    mods: Dict[str, Path] = {}
    for pkg, folder in dirs.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            # a sub-folder mapped elsewhere (e.g. mlip/models if it existed) belongs to that mapping
            name = ".".join([pkg] + parts)
            if any(name == other or name.startswith(other + ".") for other in dirs
                   if other != pkg and other.startswith(pkg + ".")):
                continue
            mods[name] = path
    return mods


@functools.lru_cache(maxsize=None)
def syntax_trees(root: Path) -> Dict[str, ast.Module]:
    """Every module of the package → its parsed source."""
    return {mod: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for mod, path in module_files(root).items()}


def imports(root: Path) -> List[Import]:
    """Every import, anywhere in a module (functions included), of a module of the package."""
    mods = module_files(root)
    found: List[Import] = []
    for mod, tree in syntax_trees(root).items():
        is_package = mods[mod].name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_package else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in mods:  # ``from pkg import submodule``
                        found.append(Import(mod, sub, None, node.lineno))
                    elif source in mods:
                        found.append(Import(mod, source, alias.name, node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods:
                        found.append(Import(mod, alias.name, None, node.lineno))
    found = [imp for imp in found if imp.target != imp.importer]
    return found + package_inits_run(found, mods)


def package_inits_run(found: List[Import], mods: Dict[str, Path]) -> List[Import]:
    """The packages whose ``__init__`` the imports ``found`` execute: importing ``a.b.c`` runs
    ``a/__init__`` and ``a/b/__init__`` first, except those of the importer's own packages (already
    running when the importer runs). A module that imports ``a.b.c`` therefore depends on ``a.b`` as
    well: a cycle through a package's ``__init__`` (``x`` → ``a.b.c``, ``a/b/__init__`` → ``x``) is a
    cycle, held apart at most by a deferred import. Each is an :class:`Import` of the package (no name)."""
    out: List[Import] = []
    for imp in found:
        parts = imp.target.split(".")
        for k in range(1, len(parts)):
            package = ".".join(parts[:k])
            running = imp.importer == package or imp.importer.startswith(package + ".")
            if package in mods and not running and package != imp.importer:
                out.append(Import(imp.importer, package, None, imp.line))
    return out


def private_attribute_uses(root: Path) -> List[Import]:
    """``import mlip.x as m`` (or ``from mlip import x``) then ``m._name`` in another module."""
    mods = module_files(root)
    found: List[Import] = []
    for mod, tree in syntax_trees(root).items():
        aliases: Dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods and alias.asname:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in mods:
                        aliases[alias.asname or alias.name] = sub
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and is_private(node.attr)
                    and aliases[node.value.id] != mod):
                found.append(Import(mod, aliases[node.value.id], node.attr, node.lineno))
    return found


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def graph(root: Path) -> Dict[str, Set[str]]:
    """Module → the modules of the package it imports."""
    out: Dict[str, Set[str]] = {m: set() for m in module_files(root)}
    for imp in imports(root):
        out[imp.importer].add(imp.target)
    return out


def cycles(root: Path) -> List[List[str]]:
    """The strongly connected components of more than one module (each a sorted list), sorted."""
    g = graph(root)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
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

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(g) + 100))
    try:
        for v in sorted(g):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def private_imports(root: Path) -> List[Import]:
    """``from mlip.x import _name`` in another module, and ``m._name`` on an imported module ``m``."""
    return [imp for imp in imports(root) if imp.name is not None and is_private(imp.name)] \
        + private_attribute_uses(root)


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of the longest prefix matching ``module`` (-1: none)."""
    if module == "mlip":
        return [name for name, _ in LAYERS].index(PACKAGE_LAYER)
    best, best_len = -1, -1
    for k, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = k, len(prefix)
    return best


def upward_imports(root: Path, allowed: Iterable[Tuple[str, str]] = ()) -> List[Import]:
    """Imports of a module of a higher layer than the importer's, except the ``allowed`` pairs
    (modules in no layer are left to :func:`test_every_module_has_a_layer`)."""
    allowed = set(allowed)
    return [imp for imp in imports(root)
            if layer_of(imp.target) > layer_of(imp.importer) >= 0 and (imp.importer, imp.target) not in allowed]


def layer_name(module: str) -> str:
    k = layer_of(module)
    return LAYERS[k][0] if k >= 0 else "no layer"


def describe(imp: Import) -> str:
    layer = f"{layer_name(imp.importer)} → {layer_name(imp.target)}"
    what = imp.target if imp.name is None else f"{imp.target}.{imp.name}"
    return f"{imp.importer} (line {imp.line}) imports {what} [{layer}]"


# ------------------------------------------------------------------------------------------ tests
def test_every_module_has_a_layer():
    unplaced = sorted(m for m in module_files(ROOT) if layer_of(m) < 0)
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_no_import_cycles():
    found = cycles(ROOT)
    assert not found, "import cycles:\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_no_private_names_across_modules():
    found = private_imports(ROOT)
    assert not found, "private names imported across modules (give them a public name):\n" + "\n".join(
        describe(imp) for imp in found)


def test_layers_point_one_way():
    found = upward_imports(ROOT, ALLOWED_UPWARD)
    assert not found, "imports up the layers (see LAYERS):\n" + "\n".join(describe(imp) for imp in found)
    # an allowed entry that matches no import any more, or does not go up, is stale: remove it
    real = {(imp.importer, imp.target) for imp in imports(ROOT)}
    stale = [pair for pair in ALLOWED_UPWARD if pair not in real or layer_of(pair[1]) <= layer_of(pair[0])]
    assert not stale, f"stale ALLOWED_UPWARD entries: {stale}"


def test_the_checks_catch_what_they_look_for(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.package-dir]\n"mlip" = "mlip"\n'
                                             '"mlip.models" = "models"\n')
    pkg, models = tmp_path / "mlip", tmp_path / "models"
    (pkg / "data").mkdir(parents=True)
    models.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "io.py").write_text("from mlip.data import reader\n")  # up: base → data
    (pkg / "data" / "__init__.py").write_text("")
    (pkg / "data" / "reader.py").write_text("def f():\n    from ..io import _helper\n")  # cycle + private
    (models / "__init__.py").write_text("import mlip.io as io\nio._other()\n")  # private attribute
    assert cycles(tmp_path) == [["mlip.data.reader", "mlip.io"]]
    assert {(i.importer, i.name) for i in private_imports(tmp_path)} == {
        ("mlip.data.reader", "_helper"), ("mlip.models", "_other")}
    # importing mlip.data.reader runs mlip/data/__init__ as well
    upward = [(i.importer, i.target) for i in upward_imports(tmp_path)]
    assert upward == [("mlip.io", "mlip.data.reader"), ("mlip.io", "mlip.data")]
    assert layer_of("mlip.nn.radial") == layer_of("mlip.so3.wigner") < layer_of("mlip.models.platonic")


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    # the shape of the cycle kernels/neighbor_list → neighbors/__init__ → neighbors/backends → kernels/
    # neighbor_list, held apart by a deferred import: no module imports ``mlip.neighbors`` by name
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.package-dir]\n"mlip" = "mlip"\n')
    pkg = tmp_path / "mlip"
    for folder in ("kernels", "neighbors"):
        (pkg / folder).mkdir(parents=True)
    (pkg / "__init__.py").write_text("from mlip.neighbors import neighbor_list\n")
    (pkg / "kernels" / "__init__.py").write_text("")
    (pkg / "kernels" / "search.py").write_text("from mlip.neighbors.edges import finalize\n")
    (pkg / "neighbors" / "__init__.py").write_text("from mlip.neighbors.backends import neighbor_list\n")
    (pkg / "neighbors" / "edges.py").write_text("def finalize():\n    pass\n")
    (pkg / "neighbors" / "backends.py").write_text(
        "from mlip.neighbors.edges import finalize\n\n\ndef neighbor_list():\n"
        "    from mlip.kernels.search import search\n")
    assert cycles(tmp_path) == [["mlip.kernels.search", "mlip.neighbors", "mlip.neighbors.backends"]]
    # importing a module of one's own package runs no __init__ anew; the root package runs first
    implied = {(i.importer, i.target) for i in imports(tmp_path) if i.name is None}
    assert implied == {("mlip.kernels.search", "mlip.neighbors"), ("mlip.neighbors.backends", "mlip.kernels")}


def main(root: Path) -> int:
    """Print every finding of the checks above for the checkout at ``root``; 1 when there is one."""
    lines = [f"UNPLACED {m}" for m in sorted(module_files(root)) if layer_of(m) < 0]
    lines += ["CYCLE " + " ↔ ".join(c) for c in cycles(root)]
    lines += ["PRIVATE " + describe(imp) for imp in private_imports(root)]
    lines += ["UPWARD " + describe(imp) for imp in upward_imports(root, ALLOWED_UPWARD)]
    print("\n".join(lines) if lines else f"{root}: no cycles, no private imports, layers point one way")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT))
