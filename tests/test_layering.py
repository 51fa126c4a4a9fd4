"""The package's layers: no module of labsupport imports a module of a higher layer.

The table is the LAYERS block of ``labsupport/__init__.py``'s docstring: one header line per
layer (``1. foundation``, ..., ``apart``), then one line per module, ``name  what it holds``
(``name/`` marks a package). Every import is read from the source with `ast`, function-level
imports included; a package counts by its top-level name (``labsupport.timing.peaks`` is
``timing``). A module of the ``apart`` layer (an entry point another program loads, such as
the Sphinx extension) may import any layer, and no module may import it.

The layers order the top-level modules; inside a package nothing orders its modules, so a
second check reads the import graph of every package (``labsupport`` itself, whose nodes
are its top-level modules and packages, and each subpackage, whose nodes are its own
modules and its ``__init__``) and fails on a cycle, function-level imports included: two
modules that import each other, even lazily, are one job split in two files.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

import labsupport

PACKAGE = Path(labsupport.__file__).parent
LAYER_LINE = re.compile(r"^ {0,3}(?:(\d+)\. |(apart)\b)")
MODULE_LINE = re.compile(r"^ {3,}([a-z_][a-z0-9_]*)(/?) {2,}(\S.*)$")
APART = "apart"


def layers(docstring: str) -> dict[str, tuple]:
    """{module: (layer, is_package, what)} from the LAYERS block of a docstring; the layer is
    an int from 1, or ``"apart"``."""
    block = docstring.split("LAYERS", 1)[1]
    table, layer = {}, None
    for line in block.splitlines():
        if header := LAYER_LINE.match(line):
            layer = int(header[1]) if header[1] else APART
        elif row := MODULE_LINE.match(line):
            name, slash, what = row.groups()
            assert layer is not None, f"module {name!r} is listed before any layer"
            assert name not in table, f"module {name!r} is listed twice"
            table[name] = (layer, bool(slash), what)
    return table


TABLE = layers(labsupport.__doc__)


def top_level_modules() -> dict[str, bool]:
    """{name: is_package} of every module and package directly under labsupport/."""
    found = {p.stem: False for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    found.update({p.parent.name: True for p in PACKAGE.glob("*/__init__.py")})
    return found


def imported_modules(source: str, module: str, is_package: bool) -> set[str]:
    """The labsupport modules (dotted, absolute) that ``source``, the code of ``module``
    (``labsupport.timing.peaks``), imports anywhere, relative imports resolved."""
    found = set()
    for target, names in import_statements(source, module, is_package):
        found.add(target)
        found |= {f"{target}.{name}" for name in names}            # `from . import plots`
    return {name for name in found if name == "labsupport" or name.startswith("labsupport.")}


def import_statements(source: str, module: str, is_package: bool):
    """Each import of ``source`` (the code of ``module``) as (target, names): ``import a.b``
    gives ("a.b", ()), ``from .x import y, z`` gives (the absolute "….x", ("y", "z"))."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            yield target, tuple(alias.name for alias in node.names)


def top_name(module: str) -> str | None:
    """``timing`` for ``labsupport.timing.peaks``; None for ``labsupport`` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def violations(name: str, imports: set[str], table: dict) -> list[str]:
    """What module ``name`` (top-level) imports against the table, as messages."""
    layer = table[name][0]
    found = []
    for module in sorted(imports):
        other = top_name(module)
        if other is None or other == name or other not in top_level_modules():
            continue                    # the package itself, or an attribute of a module (a name)
        their = table[other][0]
        if their == APART:
            found.append(f"{name} imports {module}, of the apart layer (nothing may import it)")
        elif layer != APART and their > layer:
            found.append(f"{name} (layer {layer}) imports {module}, of layer {their} above it")
    return found


def sources():
    """(top-level name, dotted module, is_package, source) for every .py file of labsupport."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        dotted = ".".join(parts[:-1] if is_package else parts)
        if dotted != "labsupport":
            yield top_name(dotted), dotted, is_package, path.read_text(encoding="utf-8")


# --- cycles inside a package ------------------------------------------------------------------

def import_targets(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules and packages (dotted) that ``source``, the code of ``module``, imports
    anywhere: ``from . import present`` reaches the module ``present`` when ``known`` (every
    dotted module and package) has it, else the package, whose ``__init__`` defines the name."""
    found = set()
    for target, names in import_statements(source, module, is_package):
        found |= {f"{target}.{name}" if f"{target}.{name}" in known else target
                  for name in names} or {target}
    return found


def _node(name: str, package: str) -> str | None:
    """The node of ``package``'s graph that holds ``name``: the package itself (its
    ``__init__``), the child module or subpackage that contains it, or None (outside)."""
    if name == package:
        return package
    if name.startswith(package + "."):
        return package + "." + name[len(package) + 1:].split(".")[0]
    return None


def package_graphs(files: Iterable[tuple[str, bool, str]]) -> dict[str, dict[str, set[str]]]:
    """{package: {node: the nodes it imports}} for every package among ``files``, each a
    (dotted module, is_package, source): a package's nodes are itself and its children."""
    files = list(files)
    known = {dotted for dotted, _, _ in files}
    packages = {dotted for dotted, is_package, _ in files if is_package}
    graphs = {package: {} for package in packages}
    for dotted, is_package, source in files:
        targets = import_targets(source, dotted, is_package, known)
        for package in packages:
            here = _node(dotted, package)
            if here is None:
                continue
            edges = graphs[package].setdefault(here, set())
            edges |= {n for n in (_node(t, package) for t in targets) if n is not None and n != here}
    return graphs


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the nodes along it, the first repeated at the end, or None."""
    state, path = {}, []                       # state: 1 on the current path, 2 done

    def visit(node):
        state[node] = 1
        path.append(node)
        for other in sorted(graph.get(node, ())):
            if state.get(other) == 1:
                return path[path.index(other):] + [other]
            if other not in state and (cycle := visit(other)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def cycles(files) -> list[str]:
    """A message per package whose modules import each other in a cycle."""
    found = []
    for package, graph in sorted(package_graphs(files).items()):
        cycle = find_cycle(graph)
        if cycle:
            short = ["__init__" if n == package else n[len(package) + 1:] for n in cycle]
            found.append(f"{package}: {' -> '.join(short)}")
    return found


def test_no_package_has_an_import_cycle():
    top = ("labsupport", True, (PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    files = [top, *((dotted, is_package, source) for _, dotted, is_package, source in sources())]
    assert {dotted for dotted, is_package, _ in files if is_package} >= {"labsupport", "labsupport.compare"}
    assert cycles(files) == []


def test_the_cycle_check_sees_a_planted_cycle_inside_a_package():
    """The check can fail: the comparison package as it was, when the table's module imported
    the results' and the results imported the table's inside their methods, is a cycle; so is
    one through a module's own package (``from . import name`` of a name its __init__ defines)
    and one between two top-level modules of one layer."""
    was = [("labsupport.compare", True, "from .results import Comparison\n"),
           ("labsupport.compare.results", False,
            "class Comparison:\n    def table(self):\n        from .present import table\n"),
           ("labsupport.compare.present", False, "from .results import RIDGE, STOP_LABELS\n")]
    assert cycles(was) == ["labsupport.compare: results -> present -> results"]
    fixed = [was[0], ("labsupport.compare.results", False, "from . import present\n"),
             ("labsupport.compare.present", False, "from .labels import RIDGE\n"),
             ("labsupport.compare.labels", False, "RIDGE = 'ridge'\n")]
    assert cycles(fixed) == []
    through_init = [("labsupport.timing", True, "from .sweep import cost_sweep\n"),
                    ("labsupport.timing.sweep", False, "from . import time_call\n")]
    assert cycles(through_init) == ["labsupport.timing: __init__ -> sweep -> __init__"]
    same_layer = [("labsupport.data", False, "def f():\n    import labsupport.plots\n"),
                  ("labsupport.plots", False, "from .data import Series\n")]
    assert cycles([("labsupport", True, ""), *same_layer]) == ["labsupport: data -> plots -> data"]


def test_every_module_is_in_the_table_once_with_what_it_holds():
    on_disk = top_level_modules()
    assert set(TABLE) == set(on_disk), (f"not in the table: {sorted(set(on_disk) - set(TABLE))}; "
                                        f"in the table, not on disk: {sorted(set(TABLE) - set(on_disk))}")
    for name, (_, is_package, what) in TABLE.items():
        assert on_disk[name] or not is_package, f"{name} is a module, not a package: write it without '/'"
        assert len(what.split()) >= 3, f"{name}: say in a line what it holds"
    numbered = sorted({layer for layer, *_ in TABLE.values() if layer != APART})
    assert numbered == list(range(1, len(numbered) + 1)), f"layers must be numbered 1, 2, ...: {numbered}"


@pytest.mark.parametrize("name, module, is_package, source", list(sources()),
                         ids=[dotted for _, dotted, _, _ in sources()])
def test_no_module_imports_a_higher_layer(name, module, is_package, source):
    assert violations(name, imported_modules(source, module, is_package), TABLE) == []


def test_the_check_sees_an_import_from_above_in_every_form():
    """The check can fail: imports from a higher layer are found absolute, relative, inside a
    function and as ``from . import``, and nothing imports the apart layer."""
    table = {"units": (1, False, "a b c"), "timing": (3, True, "a b c"), "report": (6, False, "a b c"),
             "sphinx_provenance": (APART, False, "a b c")}
    upward = ("import labsupport.report\n"
              "def f():\n    from ..report import table\n"
              "from .. import sphinx_provenance\n")
    found = violations("timing", imported_modules(upward, "labsupport.timing.sweep", False), table)
    assert found == ["timing (layer 3) imports labsupport.report, of layer 6 above it",
                     "timing (layer 3) imports labsupport.report.table, of layer 6 above it",
                     "timing imports labsupport.sphinx_provenance, of the apart layer "
                     "(nothing may import it)"]
    assert violations("units", imported_modules("from . import report\n", "labsupport.units", False),
                      table) == ["units (layer 1) imports labsupport.report, of layer 6 above it"]
    apart = imported_modules("from .report import table\n", "labsupport.sphinx_provenance", False)
    assert violations("sphinx_provenance", apart, table) == []          # an entry point may import any layer
    downward = "from ..units import format_bytes\nfrom .clocks import time_call\nimport torch\n"
    assert violations("timing", imported_modules(downward, "labsupport.timing.peaks", False), table) == []


def test_a_section_may_import_any_concept_module_and_no_concept_module_a_section():
    """The sections are the top layer: a planted import of a section's code from a concept
    module (a model, the comparison protocol, the claims) fails; a section importing any
    concept module passes."""
    assert TABLE["sections"][0] == max(layer for layer, *_ in TABLE.values() if layer != APART)
    for concept, module, planted in (
            ("models", "labsupport.models.patch", "from ..sections.lab import racers\n"),
            ("compare", "labsupport.compare.protocol", "from ..sections import lab\n"),
            ("profile", "labsupport.profile.choose", "import labsupport.sections.lab.sizes\n"),
            ("report", "labsupport.report", "def f():\n    from .sections.lab import checks\n")):
        found = violations(concept, imported_modules(planted, module, False), TABLE)
        assert found and all("labsupport.sections" in f and "above it" in f for f in found), (concept, found)
    section = ("from ...compare import compare\nfrom ...models import PatchTransformer\n"
               "from ...widgets import attention_figure\nfrom ...checks.core import check\n")
    assert violations("sections", imported_modules(section, "labsupport.sections.lab.checks", False),
                      TABLE) == []
