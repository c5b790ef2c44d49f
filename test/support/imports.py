"""The import checkers of test/test_layers.py: every project module's imports read with ``ast``
(:func:`imported_names`), the layers and core order they are held to (:data:`CORE_ORDER`, ROS
names, plotting libraries), the checks that list offending imports (:func:`violations`,
:func:`back_arrows`, :func:`plotting_outside_plots`, :func:`private_imports`) and the project's
import graph with its cycles (:func:`import_graph`, :func:`import_cycles`). A plain module: the
rules' tests are in test/test_layers.py.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
CORE_EXCLUDED = ('ros', 'cli')
ROS_PREFIXES = ('rclpy', 'rosidl', 'rmw', 'launch', 'launch_ros', 'rosbag2_py', 'rqt', 'python_qt_binding')
ROS_SUFFIXES = ('_msgs', '_srvs', '_interfaces', '_action')
NODE_PACKAGES = ('mujoco_bridge', 'calibration_node')
#: The core's subpackages, lowest first: each imports only those before it (and itself).
#: ``plots`` draws plain data (arrays, dicts, dataclasses of the layers below);
#: ``calibration`` reads recordings, fits, and calls ``plots`` for its figures.
CORE_ORDER = ('common', 'model', 'control', 'twin', 'simulation', 'monitoring', 'visual', 'plots', 'calibration', 'identification')
#: Top-level modules of plotting libraries: imported in ``shadow_twin/plots`` only.
PLOTTING = ('matplotlib', 'mpl_toolkits', 'pylab')


def python_files(package: str) -> list[Path]:
    """Every ``.py`` file under ``package`` (a folder relative to the repository), sorted."""
    return sorted((REPO / package).rglob('*.py'))


def module_name(path: Path, root: Path = REPO) -> str:
    """The dotted module name of file ``path`` under ``root`` (a package's ``__init__.py``: the package)."""
    parts = list(path.relative_to(root).with_suffix('').parts)
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def is_core(path: Path) -> bool:
    """Whether ``path`` is a core module: in ``shadow_twin`` outside :data:`CORE_EXCLUDED`."""
    rel = path.relative_to(REPO / 'shadow_twin').parts
    return len(rel) == 1 or rel[0] not in CORE_EXCLUDED


def imported_names(path: Path, root: Path = REPO) -> list[tuple[int, str, bool]]:
    """(line, dotted module, inside a function) of every import of ``path`` (relative ones resolved),
    for ``from a import b`` both ``a`` and ``a.b``."""
    tree = ast.parse(path.read_text(), str(path))
    name = module_name(path, root)
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function.update(id(sub) for sub in ast.walk(node) if sub is not node)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name, id(node) in in_function) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parent = package.split('.')[:len(package.split('.')) - node.level + 1]
                base = '.'.join(parent + ([base] if base else []))
            out.append((node.lineno, base, id(node) in in_function))
            out += [(node.lineno, f'{base}.{alias.name}', id(node) in in_function) for alias in node.names]
    return out


def core_rank(path: Path, root: Path = REPO) -> int:
    """Place in :data:`CORE_ORDER` of the subpackage holding core module ``path``; -1 for a
    top-level ``shadow_twin`` module (the lowest)."""
    rel = path.relative_to(root / 'shadow_twin').parts
    return -1 if len(rel) == 1 else CORE_ORDER.index(rel[0])


def back_arrows(paths, root: Path = REPO) -> list[str]:
    """Imports of core modules ``paths`` that run back up :data:`CORE_ORDER`, as ``file:line imports name``."""
    found = []
    for path in paths:
        rank = core_rank(path, root)
        for line, name, _ in imported_names(path, root):
            parts = name.split('.')
            if parts[0] == 'shadow_twin' and len(parts) > 1 and parts[1] in CORE_ORDER \
                    and CORE_ORDER.index(parts[1]) > rank:
                found.append(f'{path.relative_to(root)}:{line} imports {name}')
    return found


def plotting_outside_plots(paths, root: Path = REPO) -> list[str]:
    """Imports of :data:`PLOTTING` libraries by modules outside ``shadow_twin/plots``."""
    plots = root / 'shadow_twin' / 'plots'
    return [f'{path.relative_to(root)}:{line} imports {name}' for path in paths if plots not in path.parents
            for line, name, _ in imported_names(path, root) if name.split('.')[0] in PLOTTING]


def is_ros(name: str) -> bool:
    """Whether dotted module ``name`` is of ROS (rclpy, an interface package and the like)."""
    top = name.split('.')[0]
    return top.startswith(ROS_PREFIXES) or top.endswith(ROS_SUFFIXES) or top == 'builtin_interfaces'


def violations(paths, forbidden) -> list[str]:
    """Imports of ``paths`` whose module ``forbidden(name)`` holds for, as ``file:line imports name``."""
    found = []
    for path in paths:
        for line, name, _ in imported_names(path):
            if forbidden(name):
                found.append(f'{path.relative_to(REPO)}:{line} imports {name}')
    return found


def private_imports(paths, root: Path = REPO) -> list[str]:
    """``from <project module> import _name`` (another module's private name) in ``paths``."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').startswith(
                    ('shadow_twin', *NODE_PACKAGES))):
                found += [f'{path.relative_to(root)}:{node.lineno} imports {alias.name}' for alias in node.names
                          if alias.name.startswith('_') and not alias.name.startswith('__')]
    return found


def import_graph(packages=('shadow_twin', *NODE_PACKAGES), root: Path = REPO) -> dict[str, set[str]]:
    """{module: the project modules it imports} of every module of ``packages``; every import counts,
    those inside functions and under ``if TYPE_CHECKING:`` too. An imported name resolves to the
    longest module it names (``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``)."""
    modules = {module_name(p, root): p for package in packages for p in sorted((root / package).rglob('*.py'))}
    graph = {}
    for name, path in modules.items():
        graph[name] = set()
        for _, imported, _ in imported_names(path, root):
            while imported and imported not in modules:
                imported = imported.rpartition('.')[0]
            if imported and imported != name:
                graph[name].add(imported)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules of each import cycle of ``graph`` (its strongly connected components of more than
    one module, Tarjan's algorithm), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for module in sorted(graph):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found
