"""The package's layers import one way (docs/architecture.md, "Layers"): no module imports a module
of a higher layer, at module level or inside a function (imports under ``TYPE_CHECKING`` aside,
they never run), and no package imports another in a circle."""

import ast
import pathlib

import swarp

ROOT = pathlib.Path(swarp.__file__).parent

#: Layers from the ground up; a module's layer is its longest matching prefix. Entry points (the
#: package's face, the demos, benchmarks) sit on top and may import anything.
LAYERS = [
    ("swarp.core",),
    ("swarp.runtime",),
    ("swarp.physics",),
    ("swarp.sensors",),
    ("swarp.scenarios.framework",),
    ("swarp.scenarios",),
    ("swarp.render",),
    ("swarp.env",),
    ("swarp.interop", "swarp.distributed", "swarp.vmas"),
    ("swarp.train",),
    ("swarp", "swarp.demo", "swarp.render.demo", "swarp.benchmark", "swarp.testing", "swarp.scenario"),
]


def layer_of(module: str) -> int:
    best, rank = -1, None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix in ("swarp", "swarp.demo", "swarp.render.demo")
            matches = module == prefix if exact else module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > best:
                best, rank = len(prefix), index
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: pathlib.Path) -> list[tuple[str, int]]:
    """``(imported swarp module, line)`` of every import that can run (not under ``TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node, checking: bool):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, checking)
            return
        if not checking:
            if isinstance(node, ast.Import):
                found.extend((alias.name, node.lineno) for alias in node.names if alias.name.startswith("swarp"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("swarp"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    # ``from package import module`` names the module; otherwise the name's module.
                    is_module = (ROOT.parent / full.replace(".", "/")).with_suffix(".py").exists() or (
                        ROOT.parent / full.replace(".", "/") / "__init__.py"
                    ).exists()
                    found.append((full if is_module else node.module, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, checking)

    visit(tree, False)
    return found


def test_imports_point_down_the_layers():
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        importer = module_name(path)
        for imported, line in imports_of(path):
            if layer_of(imported) > layer_of(importer):
                upward.append(f"{path.relative_to(ROOT.parent)}:{line}: {importer} imports {imported}")
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


def test_no_package_imports_another_in_a_circle():
    """Between the packages of a layer (and within none of them) there is no cycle either."""
    edges: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        importer = module_name(path)
        for imported, _ in imports_of(path):
            a, b = importer.rsplit(".", 1)[0] if path.name != "__init__.py" else importer, imported.rsplit(".", 1)[0]
            if a != b and a.startswith("swarp.") and b.startswith("swarp."):
                edges.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        nexts = edges.get(start, ())
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})) for nxt in nexts)

    circles = sorted(f"{a} <-> {b}" for a in edges for b in edges[a] if reaches(b, a, {b}))
    assert not circles, "packages importing each other in a circle:\n" + "\n".join(circles)
