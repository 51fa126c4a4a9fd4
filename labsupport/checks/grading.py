"""Graded tests: the hidden test of each exercise in the nbgrader course.

``checks.grade("attention_weights", attention_weights)`` runs the exercise's check on
inputs drawn when it runs (a seed from ``os.urandom``, or ``LABSUPPORT_GRADE_SEED`` to
reproduce a grade), prints the verdict with its seed when the answer passes, and raises
``AssertionError`` with the verdict when it does not, which is what nbgrader scores and
shows in the feedback. Before running anything it reads the answer's code: an answer
that imports or calls the book's own implementation (anything in ``labsupport``, the
self-checks included), reads frames or source (``inspect``, ``sys._getframe``, ...) or
hides what it calls (``eval``, ``__import__``, ...) gets 0 points with a note that names
what it used (`forbidden_uses`, `forbidden_names`).
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib
import linecache
import os
import textwrap
import types

from .core import CHECKS, CheckResult, Draw, run_check

SEED_VARIABLE = "LABSUPPORT_GRADE_SEED"

# Every exercise: the book's package (its kernels, layers, references and checks), and the
# ways to read the check's frames and inputs or to hide a call from this inspection.
COMMON = ("labsupport", "inspect", "gc", "traceback", "ctypes", "importlib", "dis",
          "sys._getframe", "sys._current_frames", "sys.modules", "sys.settrace", "sys.setprofile",
          "threading.settrace", "threading.setprofile")
FORBIDDEN_BUILTINS = ("eval", "exec", "compile", "__import__", "globals", "vars", "breakpoint")
FORBIDDEN_ATTRIBUTES = ("f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "tb_next",
                        "gi_frame", "cr_frame", "ag_frame", "__globals__", "__closure__",
                        "__builtins__", "__code__")
# Predictions: a measurement is not a prediction.
MEASURING = ("torch.profiler", "torch.autograd.profiler", "torch.cuda", "tracemalloc", "resource",
             "psutil")


def forbidden_names(check_fn) -> tuple[str, ...]:
    """The dotted names an answer to ``check_fn``'s exercise may not import or call."""
    extra = MEASURING if check_fn.predicts else ()
    return COMMON + extra + check_fn.forbid


def grade(name: str, answer, *, label: str | None = None, seed: int | None = None) -> None:
    """The graded test of the exercise whose check is ``checks.<name>``: print the verdict
    when ``answer`` passes on freshly drawn inputs, else raise ``AssertionError(verdict)``."""
    result = graded(name, answer, label=label, seed=seed)
    if not result.passed:
        raise AssertionError(str(result))
    print(result)


def graded(name: str, answer, *, label: str | None = None, seed: int | None = None) -> CheckResult:
    """The graded verdict on ``answer`` (see `grade`), without raising."""
    if name not in CHECKS:
        raise ValueError(f"no check named {name!r}; expected one of {sorted(CHECKS)}")
    check_fn = CHECKS[name]
    seed = draw_seed() if seed is None else int(seed)
    if check_fn.drawn:
        note = (f"graded on inputs drawn with seed {seed}; to reproduce: "
                f"checks.grade({name!r}, <your function>, seed={seed})")
    else:
        note = "graded: the measurement is repeated when grading"
    used = forbidden_uses(answer, forbidden_names(check_fn))
    if used:
        message = (f"your answer uses {', '.join(used)}; the graded test of this exercise does not "
                   "accept the book's own implementation (anything from labsupport, its checks "
                   "included), nor code that reads frames or hides what it calls, so it scores 0 "
                   "whatever it returns. Write the computation yourself: the practice check in the "
                   "notebook still says whether it is right")
        return CheckResult(label or check_fn.exercise, False, message, graded=True, note=note)
    return run_check(check_fn, answer, Draw(seed, graded=True), label=label, note=note,
                     unavailable=check_fn.unavailable)


def draw_seed() -> int:
    """``LABSUPPORT_GRADE_SEED`` if set (to reproduce a grade), else 32 random bits."""
    if os.environ.get(SEED_VARIABLE):
        return int(os.environ[SEED_VARIABLE])
    return int.from_bytes(os.urandom(4), "big")


# --- reading an answer's code ------------------------------------------------------------------

def forbidden_uses(answer, forbidden) -> list[str]:
    """What ``answer`` (a function, the functions it calls that were written beside it, and
    the notebook cell it was written in) imports or calls among ``forbidden`` dotted names,
    forbidden builtins and frame attributes; [] when nothing."""
    found: list[str] = []
    _Reader(tuple(forbidden), found).read(answer)
    return sorted(set(found))


class _Reader:
    def __init__(self, forbidden: tuple[str, ...], found: list[str]):
        self.forbidden, self.found, self.seen = forbidden, found, set()

    def read(self, obj) -> None:
        """Inspect one callable (and, through it, what it calls)."""
        obj = _unwrap(obj)
        if id(obj) in self.seen:
            return
        self.seen.add(id(obj))
        if isinstance(obj, type):
            for member in vars(obj).values():
                if isinstance(member, (types.FunctionType, staticmethod, classmethod)):
                    self.read(getattr(member, "__func__", member))
            return
        if not isinstance(obj, types.FunctionType):
            call = vars(type(obj)).get("__call__")
            if self.is_forbidden(obj) or self.is_forbidden(type(obj)):
                self.found.append(_canonical(obj if callable(obj) and hasattr(obj, "__qualname__")
                                             else type(obj)))
            elif isinstance(call, types.FunctionType):
                self.read(call)                            # an instance of a class with __call__
            return
        if self.is_forbidden(obj):                         # the answer is the library's function
            self.found.append(_canonical(obj))
            return
        self.read_code(obj)

    def read_code(self, fn) -> None:
        trees = _source_trees(fn)
        self.read_bytecode(fn.__code__, fn, builtins_too=trees is None)
        if trees is None:
            return
        aliases = {}
        for tree in trees:
            aliases.update(_import_aliases(tree))
        for tree in trees:
            self.walk(tree, fn, aliases, [set()])

    def walk(self, node, fn, aliases, scopes: list) -> None:
        """Read ``node`` and its children; ``scopes`` are the local names of the functions
        and comprehensions around it, which are never the notebook's globals."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            outer = [*getattr(node, "decorator_list", ()), *node.args.defaults,
                     *(d for d in node.args.kw_defaults if d is not None)]
            for child in outer:
                self.walk(child, fn, aliases, scopes)
            for child in node.body if isinstance(node.body, list) else [node.body]:
                self.walk(child, fn, aliases, [*scopes, _local_names(node)])
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            scopes = [*scopes, targets]
        self.read_node(node, fn, aliases, set().union(*scopes))
        if isinstance(node, ast.Attribute) and _chain(node):
            return                                  # a.b.c: read once, with its prefixes
        for child in ast.iter_child_nodes(node):
            self.walk(child, fn, aliases, scopes)

    def read_bytecode(self, code, fn, *, builtins_too: bool) -> None:
        """Frame attributes by name (and, without source, the forbidden builtins and modules):
        the names a code object loads include every attribute it reads and module it imports."""
        for name in code.co_names:
            if name in FORBIDDEN_ATTRIBUTES:
                self.found.append(f"the attribute .{name}")
            elif builtins_too and name in FORBIDDEN_BUILTINS and name not in fn.__globals__:
                self.found.append(f"{name}()")
            elif builtins_too and any(name == f or name.startswith(f + ".") for f in self.forbidden):
                self.found.append(f"`{name}`")             # an imported module, or a global name
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.read_bytecode(const, fn, builtins_too=builtins_too)

    def read_node(self, node, fn, aliases, local: set) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.check_path(alias.name, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                path = f"{node.module}.{alias.name}"
                self.check_path(path, f"from {node.module} import {alias.name}")
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            chain = _chain(node)
            if chain and (chain[0] in aliases or chain[0] not in local):
                self.check_chain(chain, fn, aliases)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            base = _chain(node.args[0])
            if base and isinstance(node.args[1].value, str) and (base[0] in aliases or base[0] not in local):
                self.check_chain(base + [node.args[1].value], fn, aliases)

    def check_path(self, path: str, written: str) -> None:
        if any(path == f or path.startswith(f + ".") for f in self.forbidden):
            self.found.append(f"`{written}`")

    def check_chain(self, chain: list[str], fn, aliases) -> None:
        """Resolve ``a.b.c`` step by step (modules and classes only) and test each step."""
        root = chain[0]
        if root in aliases:
            path = aliases[root]
            for n in range(len(chain), 0, -1):
                dotted = ".".join([path, *chain[1:n]])
                if any(dotted == f or dotted.startswith(f + ".") for f in self.forbidden):
                    self.found.append(f"`{'.'.join(chain[:n])}` ({dotted})")
                    return
            obj = _import(path)
        else:
            obj = _lookup(root, fn)
            if root in FORBIDDEN_BUILTINS and obj is getattr(builtins, root):
                self.found.append(f"{root}()")
                return
        for n, attr in enumerate([None, *chain[1:]]):
            if attr is not None:
                if not isinstance(obj, (types.ModuleType, type)):
                    return
                obj = getattr(obj, attr, None)
            if obj is None:
                return
            if self.is_forbidden(obj):
                written = ".".join(chain[:n + 1])
                canonical = _canonical(obj)
                self.found.append(f"`{written}`" + (f" ({canonical})" if canonical != written else ""))
                return
            if n == len(chain) - 1 and _written_beside(obj, fn):
                self.read(obj)                              # a helper the student wrote: read it too

    def is_forbidden(self, obj) -> bool:
        if isinstance(obj, types.ModuleType):
            name = obj.__name__
        else:
            if any(obj is _resolved(f) for f in self.forbidden if _resolved(f) is not None):
                return True
            name = getattr(obj, "__module__", None)
            if not isinstance(name, str):
                return False
        return any(name == f or name.startswith(f + ".") for f in self.forbidden
                   if isinstance(_resolved(f), types.ModuleType))


def _unwrap(obj):
    while True:
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif isinstance(obj, types.MethodType):
            obj = obj.__func__
        else:
            return obj


def _canonical(obj) -> str:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{name}" if module and name else repr(obj)


def _written_beside(obj, fn) -> bool:
    """A function or class written where the answer was (the notebook, or the same module)."""
    obj = _unwrap(obj)
    return isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == fn.__module__


def _lookup(name: str, fn):
    """``name`` as ``fn`` sees it: its closure, then its globals, then the builtins."""
    if fn.__closure__:
        for free, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            if free == name:
                try:
                    return cell.cell_contents
                except ValueError:
                    return None
    if name in fn.__globals__:
        return fn.__globals__[name]
    return getattr(builtins, name, None)


@functools.lru_cache(maxsize=None)
def _resolved(dotted: str):
    """The object a forbidden dotted name stands for (None when it does not import)."""
    return _import(dotted)


def _import(dotted: str):
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except Exception:
            continue
        for attr in parts[n:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


def _chain(node) -> list[str] | None:
    """``["torch", "nn", "functional"]`` for ``torch.nn.functional``; None for anything else."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(names)]


def _import_aliases(tree) -> dict:
    """{local name: dotted path} of the imports in ``tree``."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _local_names(func) -> set:
    """The names a function (or lambda) binds itself: its parameters, what it assigns,
    defines or loops over, less those it declares global."""
    args = func.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    declared_global = set()
    stack = list(func.body) if isinstance(func.body, list) else [func.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Global):
            declared_global |= set(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return names - declared_global


def _source_trees(fn) -> list | None:
    """The syntax trees to read for ``fn``: its own definition and, for a function written in
    a notebook (module ``__main__``), the whole cell it was written in; None without source."""
    code = fn.__code__
    source = "".join(linecache.getlines(code.co_filename))
    if not source:
        return None
    try:
        module = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    if fn.__module__ == "__main__":
        return [module]
    defs = [node for node in ast.walk(module)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            and code.co_firstlineno in (node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ())))
            and (isinstance(node, ast.Lambda) or node.name == fn.__name__)]
    return defs or None
