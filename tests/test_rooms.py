"""The rooms stay small and closed (docs/architecture.md, "Rooms"): no module of swarp over
``MAX_MODULE_LINES`` (a data table may be exempted by name, with its reason), no function over
``MAX_FUNCTION_LINES``, no private name of one module used by another, and docs/benchmarks.md a
reference of current tables, not a history."""

import ast
import collections
import pathlib

import swarp

ROOT = pathlib.Path(swarp.__file__).parent
DOCS = ROOT.parent / "docs"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 150
MAX_BENCHMARKS_LINES = 400

#: Modules allowed over ``MAX_MODULE_LINES``, each with the reason.
LONG_MODULES: dict[str, str] = {}


def modules() -> dict[pathlib.Path, ast.Module]:
    return {path: ast.parse(path.read_text()) for path in sorted(ROOT.rglob("*.py"))}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_definitions(trees: dict[pathlib.Path, ast.Module]) -> dict[str, set[pathlib.Path]]:
    """Private name -> the modules that define it: a function, a class, a module-level or local
    variable, or an attribute set on ``self``."""
    owners = collections.defaultdict(set)
    for path, tree in trees.items():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    names = [node.attr]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names = [node.id]
            for name in names:
                if is_private(name):
                    owners[name].add(path)
    return owners


def test_no_module_is_too_long():
    long = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = str(path.relative_to(ROOT.parent))
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES and name not in LONG_MODULES:
            long[name] = lines
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by what they hold): {long}"


def test_no_function_is_too_long():
    long = {}
    for path, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name}"] = lines
    assert not long, (
        f"functions over {MAX_FUNCTION_LINES} lines (a closure of kernels becomes cached per-kernel "
        f"factories; a long argument list a wp.struct): {long}"
    )


def test_no_private_name_crosses_a_module():
    trees = modules()
    owners = private_definitions(trees)
    found = []
    for path, tree in trees.items():
        where = path.relative_to(ROOT.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("swarp"):
                found += [f"{where}:{node.lineno} imports {a.name}" for a in node.names if is_private(a.name)]
            elif isinstance(node, ast.Attribute) and is_private(node.attr):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                defined = owners.get(node.attr, set())
                if defined and path not in defined:
                    found.append(f"{where}:{node.lineno} reads .{node.attr} of {sorted(str(d) for d in defined)}")
    assert not found, "private names used across modules (make them public or move the code):\n" + "\n".join(found)


def test_the_benchmarks_page_is_a_reference():
    lines = len((DOCS / "benchmarks.md").read_text().splitlines())
    assert lines <= MAX_BENCHMARKS_LINES, (
        f"docs/benchmarks.md has {lines} lines: keep one current table per target there "
        f"(at most {MAX_BENCHMARKS_LINES} lines) and move investigations to docs/journal/"
    )


def test_the_guards_catch_what_they_guard(tmp_path):
    # The private-name check on a pair of modules: one reads the other's private attribute.
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("class A:\n    def __init__(self):\n        self._hidden = 1\n")
    b.write_text("def peek(x):\n    return x._hidden\n")
    trees = {p: ast.parse(p.read_text()) for p in (a, b)}
    assert private_definitions(trees)["_hidden"] == {a}
