"""The layers depend one way: core <- shadow_twin.ros <- node packages <- shadow_twin.cli.

* Every core module (``shadow_twin`` outside ``ros/`` and ``cli/``) imports with rclpy,
  every ROS interface package and the node packages blocked (``sys.modules[name] = None``),
  and no core module mentions them in any import, not even inside a function.
* Inside the core, likewise one way, in the order of :data:`CORE_ORDER` (lowest first):
  common <- model <- control <- twin <- simulation <- monitoring <- visual <- plots <- calibration <-
  identification. No core subpackage imports one later in the order, not even inside a
  function; the top-level ``shadow_twin`` modules (``__init__``) count as the lowest and import
  no subpackage.
* Figures are drawn in ``shadow_twin/plots`` only: no other module of the package or the
  node packages imports matplotlib.
* Inside ``calibration``, its folders one way too (:data:`CALIBRATION_ORDER`): recordings <-
  scoring <- search <- engine <- contacts <- jobs.
* ``shadow_twin.ros``'s toolkit (``ros/*.py``) imports neither ``ros.twin`` nor ``ros.monitor``,
  and those two not each other; no module imports a name issue 35 moved (``common/moved.py``).
* ``shadow_twin.ros`` imports neither node package nor the CLI; ``mujoco_bridge`` and
  ``calibration_node`` do not import each other (nor the CLI).
* Imports sit at module top, except the optional heavy dependencies of :data:`LAZY`.
* No import cycle among the modules of the package and the node packages, counting imports under
  ``if TYPE_CHECKING:``.

The checkers: test/support/imports.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.imports import (CORE_ORDER, NODE_PACKAGES, REPO, back_arrows, import_cycles, import_graph,
                             imported_names, is_core, is_ros, module_name, plotting_outside_plots, private_imports,
                             python_files, violations)


#: Imports allowed inside functions: optional heavy dependencies (each says why in a comment).
LAZY = ('matplotlib', 'skopt', 'sklearn', 'cma', 'pyswarms', 'ament_index_python', 'mujoco.viewer', 'glfw',
        'mujoco_bridge.viewer',
        'ray',  # shadow_twin/calibration/engine/executor.py, shipped.py: Ray (about 1 s to import) only with --cluster
        # a calibration command's start (issue 39: the whole command in 4 s): scipy's least squares only for
        # its engine, the t quantile at the report, trimesh where meshes are written
        'scipy.optimize', 'scipy.special', 'trimesh',
        'warp', 'mujoco_warp')  # shadow_twin/simulation/warp_rollout.py: only for --backend warp (0.5 s, GPU setup)


def test_core_never_imports_ros_messages_nodes_or_upper_layers():
    core = [p for p in python_files('shadow_twin') if is_core(p)]
    assert len(core) > 25
    upper = ('shadow_twin.ros', 'shadow_twin.cli') + NODE_PACKAGES
    assert violations(core, lambda n: is_ros(n) or n.startswith(upper)) == []


def test_no_core_subpackage_imports_one_later_in_the_core_order():
    """common <- model <- control <- twin <- simulation <- monitoring <- plots <- calibration: no arrow runs back up."""
    core = [p for p in python_files('shadow_twin') if is_core(p)]
    subpackages = {p.relative_to(REPO / 'shadow_twin').parts[0] for p in core if p.parent != REPO / 'shadow_twin'}
    assert subpackages == set(CORE_ORDER)          # a new core subpackage takes its place in the order
    assert back_arrows(core) == []


#: The calibration's folders, lowest first: each imports only those before it (and itself).
CALIBRATION_ORDER = ('recordings', 'scoring', 'search', 'engine', 'contacts', 'jobs')


def test_the_calibration_folders_depend_one_way():
    """recordings <- scoring <- search <- engine <- contacts <- jobs; no module at the package's top."""
    root = REPO / 'shadow_twin' / 'calibration'
    paths = python_files('shadow_twin/calibration')
    folders = {p.relative_to(root).parts[0] for p in paths if p.parent != root}
    assert folders == set(CALIBRATION_ORDER) and {p.name for p in paths if p.parent == root} == {'__init__.py'}
    found = []
    for path in paths:
        if path.parent == root:
            continue
        rank = CALIBRATION_ORDER.index(path.relative_to(root).parts[0])
        for line, name, _ in imported_names(path):
            parts = name.split('.')
            if parts[:2] == ['shadow_twin', 'calibration'] and len(parts) > 2 and parts[2] in CALIBRATION_ORDER \
                    and CALIBRATION_ORDER.index(parts[2]) > rank:
                found.append(f'{path.relative_to(REPO)}:{line} imports {name}')
    assert found == []


def test_only_plots_imports_matplotlib():
    """Every figure is drawn in shadow_twin/plots; the rest of the package calls it."""
    paths = [p for package in ('shadow_twin', *NODE_PACKAGES) for p in python_files(package)]
    assert any('matplotlib' in name for p in python_files('shadow_twin/plots') for _, name, _ in imported_names(p))
    assert plotting_outside_plots(paths) == []


def test_ros_layer_imports_no_node_package_and_no_cli():
    ros = python_files('shadow_twin/ros')
    assert violations(ros, lambda n: n.startswith(NODE_PACKAGES + ('shadow_twin.cli',))) == []


def test_the_ros_toolkit_serves_the_twin_and_the_monitor_which_do_not_import_each_other():
    """``shadow_twin/ros/*.py`` (the toolkit) imports neither the twin's node (``ros/twin/``) nor the
    monitor's (``ros/monitor/``); those two import each other nowhere."""
    toolkit = [p for p in python_files('shadow_twin/ros') if p.parent == REPO / 'shadow_twin' / 'ros']
    twin, monitor = python_files('shadow_twin/ros/twin'), python_files('shadow_twin/ros/monitor')
    assert len(toolkit) > 8 and len(twin) > 8 and len(monitor) > 5
    nodes = ('shadow_twin.ros.twin', 'shadow_twin.ros.monitor')
    assert violations(toolkit, lambda n: n.startswith(nodes)) == []
    assert violations(twin, lambda n: n.startswith(nodes[1])) == []
    assert violations(monitor, lambda n: n.startswith(nodes[0])) == []


#: The steps of a twin goal, in order (``docs/goal_lifecycle.md``): one module each.
GOAL_STEPS = ('screening', 'preview', 'dispatch', 'follow')


def test_each_step_of_the_goal_path_imports_neither_the_server_nor_another_step():
    """screen -> preview -> dispatch -> follow: each step reads the one goal context and calls back
    into nothing; only the server (and ``/twin/preview``'s server, which screens and previews) runs them."""
    folder = REPO / 'shadow_twin' / 'ros' / 'twin'
    steps = [folder / f'{step}.py' for step in GOAL_STEPS]
    assert all(p.is_file() for p in steps)
    forbidden = tuple(f'shadow_twin.ros.twin.{m}' for m in (*GOAL_STEPS, 'server', 'preview_server'))
    for path in steps:
        own = module_name(path)
        found = [f'{module_name(path)}:{line} imports {name}' for line, name, _ in imported_names(path)
                 if name.startswith(forbidden) and not name.startswith(own)]
        assert found == []


def test_no_module_imports_a_name_issue_35_moved():
    """The old flat names (importable for one release, :mod:`shadow_twin.common.moved`) are for
    users: the project, its tests and benchmarks import the new ones."""
    from shadow_twin.common.moved import MOVED
    every = [p for package in ('shadow_twin', *NODE_PACKAGES, 'test', 'benchmarks') for p in python_files(package)]
    old = tuple(MOVED)
    assert len(old) > 20
    assert violations(every, lambda n: n in old or n.startswith(tuple(f'{o}.' for o in old))) == []


def test_no_module_imports_another_modules_private_name():
    assert private_imports(p for package in ('shadow_twin', *NODE_PACKAGES) for p in python_files(package)) == []


def test_the_checker_sees_a_private_name_imported(tmp_path):
    probe = tmp_path / 'probe.py'
    probe.write_text('from shadow_twin.model.mjcf import (\n    _secret, public)\nfrom .x import _y\nfrom os import _exit\n')
    assert [f.split(' imports ')[1] for f in private_imports([probe], tmp_path)] == ['_secret', '_y']


def test_no_import_cycle_among_project_modules():
    """No module of the package or the node packages reaches itself through imports, counting
    those under ``if TYPE_CHECKING:`` (a cycle for the type checker is one for the reader)."""
    graph = import_graph()
    assert len(graph) > 100
    assert import_cycles(graph) == []


def test_the_checker_sees_an_import_cycle_under_type_checking(tmp_path):
    package = tmp_path / 'shadow_twin' / 'sim'
    package.mkdir(parents=True)
    (package / '__init__.py').write_text('')
    (package / 'live.py').write_text('from shadow_twin.sim.reload import prepare\n')
    (package / 'reload.py').write_text('from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n'
                                       '    from shadow_twin.sim.live import Live\n')
    (package / 'other.py').write_text('from shadow_twin.sim import live\n')
    graph = import_graph(('shadow_twin',), tmp_path)
    assert graph['shadow_twin.sim.other'] == {'shadow_twin.sim', 'shadow_twin.sim.live'}
    assert import_cycles(graph) == [['shadow_twin.sim.live', 'shadow_twin.sim.reload']]


def test_node_packages_do_not_import_each_other_or_the_cli():
    assert violations(python_files('mujoco_bridge'), lambda n: n.startswith(('calibration_node', 'shadow_twin.cli'))) == []
    assert violations(python_files('calibration_node'), lambda n: n.startswith(('mujoco_bridge', 'shadow_twin.cli'))) == []


def test_imports_are_at_module_top_except_optional_heavy_dependencies():
    lazy = []
    for package in ('shadow_twin', *NODE_PACKAGES):
        for path in python_files(package):
            lines = path.read_text().split('\n')
            for line, name, inside in imported_names(path):
                if inside and not name.startswith(LAZY):
                    lazy.append(f'{path.relative_to(REPO)}:{line} imports {name} inside a function')
                if inside and name.startswith(LAZY) and not any('lazy:' in lines[i - 1] for i in (line,)) \
                        and not any('lazy:' in text for text in lines[max(0, line - 6):line]):
                    lazy.append(f'{path.relative_to(REPO)}:{line} imports {name} lazily without saying why')
    assert lazy == []


BLOCKED_IMPORT = r'''
import importlib, json, pkgutil, re, sys
blocked = {m.name for m in pkgutil.iter_modules()
           if re.search(r'(_msgs|_srvs|_interfaces|_action)$', m.name) or m.name.startswith(('rclpy', 'rosidl'))}
blocked |= {'rclpy', 'builtin_interfaces', 'mujoco_bridge', 'calibration_node', 'launch', 'launch_ros'}
for name in blocked:
    sys.modules[name] = None
failed = {}
for module in json.loads(sys.argv[1]):
    try:
        importlib.import_module(module)
    except Exception as exc:
        failed[module] = repr(exc)
print(json.dumps({'blocked': sorted(blocked), 'failed': failed,
                  'loaded_ros': sorted(n for n in sys.modules if n in blocked and sys.modules[n] is not None)}))
'''


def test_every_core_module_imports_with_rclpy_and_messages_blocked():
    modules = [module_name(p) for p in python_files('shadow_twin') if is_core(p)]
    out = subprocess.run([sys.executable, '-c', BLOCKED_IMPORT, json.dumps(modules)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert {'rclpy', 'sensor_msgs', 'trajectory_msgs'} <= set(report['blocked'])
    assert report['failed'] == {} and report['loaded_ros'] == []


FIRST_IMPORT = r"""
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == 'shadow_twin' or m.startswith('shadow_twin.')]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


def test_every_core_module_imports_first():
    """Each core module imported first, into an interpreter with no project module loaded: an
    import circle that only some orders run into (a package re-exporting a module that imports,
    through another, the package again) fails here, whatever order the rest of the suite uses."""
    modules = [module_name(p) for p in python_files('shadow_twin') if is_core(p)]
    out = subprocess.run([sys.executable, '-c', FIRST_IMPORT, json.dumps(modules)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


@pytest.mark.parametrize('source, expected', [
    ('import rclpy\n', [(1, 'rclpy', False)]),
    ('def f():\n    from sensor_msgs.msg import JointState\n',
     [(2, 'sensor_msgs.msg', True), (2, 'sensor_msgs.msg.JointState', True)]),
    ('from .jtc import GoalRejected\n', [(1, 'pkg.jtc', False), (1, 'pkg.jtc.GoalRejected', False)]),
])
def test_the_checker_sees_top_level_function_level_and_relative_imports(tmp_path, source, expected):
    """The checks above can fail: an import of rclpy, a message import inside a function and a
    relative import are all seen, with their line."""
    fake = tmp_path / 'pkg' / 'probe.py'
    fake.parent.mkdir()
    fake.write_text(source)
    assert imported_names(fake, root=tmp_path) == expected


@pytest.mark.parametrize('module, source, expected', [
    ('plots/probe.py', 'from shadow_twin.calibration.engine.report import write_outputs\n',
     ['shadow_twin/plots/probe.py:1 imports shadow_twin.calibration.engine.report',
      'shadow_twin/plots/probe.py:1 imports shadow_twin.calibration.engine.report.write_outputs']),
    ('common/probe.py', 'def f():\n    from .. import model\n',
     ['shadow_twin/common/probe.py:2 imports shadow_twin.model']),
    ('probe.py', 'import shadow_twin.common.files\n', ['shadow_twin/probe.py:1 imports shadow_twin.common.files']),
    ('calibration/probe.py', 'from shadow_twin.plots.figures import figure_png\nfrom . import run\n', []),
])
def test_the_checker_sees_an_arrow_back_up_the_core_order(tmp_path, module, source, expected):
    """The order check can fail: a plots module importing calibration, a relative import inside a
    function and a top-level module importing a subpackage are seen; imports down the order are not."""
    fake = tmp_path / 'shadow_twin' / module
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text(source)
    assert back_arrows([fake], root=tmp_path) == expected


def test_the_checker_sees_matplotlib_outside_plots(tmp_path):
    """The matplotlib check can fail: pyplot imported lazily by a CLI module is seen, by plots it is not."""
    source = 'def draw():\n    import matplotlib.pyplot as plt  # lazy: heavy\n'
    fakes = [tmp_path / 'shadow_twin' / sub / 'probe.py' for sub in ('cli', 'plots')]
    for fake in fakes:
        fake.parent.mkdir(parents=True)
        fake.write_text(source)
    assert plotting_outside_plots(fakes, root=tmp_path) == ['shadow_twin/cli/probe.py:2 imports matplotlib.pyplot']
