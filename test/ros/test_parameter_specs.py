"""Each node's parameters come from one table of ``ParameterSpec`` (issue 35, item 3); what is made
from it agrees with it:

* ``docs/parameters.md`` is the generator's output (``python -m shadow_twin.cli.parameter_docs --write``);
* the shipped ``config/*.yaml``: every key is a parameter the node loading the file declares, every
  value passes its spec, and a value equal to the default is there only when its line says ``pinned``;
* what a running node answers ``ros2 param describe`` (its ``~/describe_parameters`` service, which the
  CLI calls; the CLI itself too where ``ros2param`` is installed): description with unit and range,
  range, allowed values, read-only, type;
* each node's typed settings read its declared defaults, converted to the spec's types;
* a one-line change of a spec (default, bounds, unit) is followed by the typed settings, the
  descriptor, the validation and the generated page.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

rclpy = pytest.importorskip('rclpy')
from rclpy.parameter import Parameter  # noqa: E402

from shadow_twin.cli import parameter_docs as docs_cli  # noqa: E402
from shadow_twin.common.errors import ConfigError  # noqa: E402
from shadow_twin.ros import parameter_docs  # noqa: E402
from shadow_twin.ros import parameters as params  # noqa: E402
from shadow_twin.ros.settings import Settings, attribute_name, value_type  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'config'
#: ``config/*.yaml`` that are no node's params file of this package: the constraints file (read by
#: ``load_constraints``, checked on its own below) and diagnostic_aggregator's (another package's node).
NOT_NODE_FILES = ('constraints.yaml', 'diagnostic_aggregator.yaml')
KEY_LINE = re.compile(r'''^(?P<indent> *)(?P<key>'[^']*'|"[^"]*"|[^\s#'"\-][^:]*):(?:\s|$)''')
START_TIMEOUT = 30.0


@pytest.fixture()
def make_node():
    """``make(name, **overrides)``: plain rclpy nodes (no parameter services) in a private context."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=0)
    nodes = []

    def make(name: str = 'spec_test', **overrides):
        node = rclpy.create_node(f'{name}_{len(nodes)}', context=context, start_parameter_services=False,
                                 parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        nodes.append(node)
        return node
    yield make
    for node in nodes:
        node.destroy_node()
    rclpy.try_shutdown(context=context)


def getter(node):
    return lambda name: node.get_parameter(name).value


# -- the generated page ---------------------------------------------------------------------------------
def test_the_parameter_page_is_the_generators_output():
    page = REPO / 'docs' / 'parameters.md'
    expected = parameter_docs.render(docs_cli.node_tables(), docs_cli.COMMAND)
    assert page.is_file() and page.read_text(encoding='utf-8') == expected, \
        f'docs/parameters.md is not current: run {docs_cli.COMMAND}'


def test_the_page_has_a_row_per_parameter_with_unit_range_and_read_only():
    text = (REPO / 'docs' / 'parameters.md').read_text(encoding='utf-8')
    for table in docs_cli.node_tables():
        assert f'\n## {table.node}\n' in text
        for spec in table.specs + table.patterns:
            assert parameter_docs.row(spec) in text, spec.name
    row = parameter_docs.row(next(s for s in docs_cli.node_tables()[0].specs if s.name == 'thread_priority'))
    assert row.startswith('| `thread_priority` | integer | `50` | 0 .. 99 |  | yes |'), row
    row = parameter_docs.row(next(s for s in docs_cli.node_tables()[0].specs if s.name == 'publish_rate'))
    assert row.startswith('| `publish_rate` | double | `250.0` | 1 .. 5000 | Hz |  |'), row


# -- the shipped params files ---------------------------------------------------------------------------
def node_params_files() -> list[Path]:
    files = []
    for path in sorted(CONFIG.glob('*.yaml')):
        data = yaml.safe_load(path.read_text())
        if path.name not in NOT_NODE_FILES and isinstance(data, dict) and any(
                isinstance(v, dict) and 'ros__parameters' in v for v in data.values()):
            files.append(path)
    return files


def table_of(path: Path) -> parameter_docs.NodeTable:
    tables = [t for t in docs_cli.node_tables() if any(fnmatch.fnmatch(path.name, g) for g in t.config_files)]
    assert len(tables) == 1, f'{path.name} is loaded by {[t.node for t in tables]}: map it to exactly one node'
    return tables[0]


def flat(mapping: dict, prefix: str = ''):
    """(dotted name, value) of every leaf of a ros__parameters mapping (a mapping is a nested key)."""
    for key, value in mapping.items():
        if isinstance(value, dict):
            yield from flat(value, f'{prefix}{key}.')
        else:
            yield prefix + str(key), value


def key_lines(text: str) -> dict[str, str]:
    """{dotted name under ros__parameters: the text of its key's line} of a params file (block
    scalars and flow lists continued on further lines are skipped)."""
    out, stack, block = {}, [], None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        indent = len(line) - len(line.lstrip(' '))
        if block is not None and indent > block:
            continue
        block = None
        match = KEY_LINE.match(line)
        if not match:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match['key'].strip('\'"')))
        names = [key for _, key in stack]
        if len(names) > 2 and names[1] == 'ros__parameters':
            out['.'.join(names[2:])] = line
        if re.search(r':\s*[|>][-+]?\s*(#.*)?$', line):
            block = indent
    return out


def pinned(name: str, lines: dict[str, str]) -> bool:
    """Whether the line of ``name``, or of a key it is nested in, says ``pinned`` in its comment."""
    parts = name.split('.')
    return any('pinned' in lines.get('.'.join(parts[:k]), '').partition(' #')[2] for k in range(1, len(parts) + 1))


def spec_for(name: str, table: parameter_docs.NodeTable) -> params.ParameterSpec | None:
    for spec in table.specs + table.patterns:
        pattern = re.escape(spec.name).replace(re.escape('<name>'), r'[^.]+').replace(re.escape('<joint>'), '.+')
        if re.fullmatch(pattern, name):
            return spec
    return None


def test_every_node_params_file_is_mapped_to_one_node():
    files = node_params_files()
    assert {p.name for p in files} >= {'mujoco_bridge.yaml', 'mock_hardware.yaml', 'twin.yaml', 'twin_cell.yaml',
                                       'twin_monitor.yaml', 'calibration_node.yaml'}
    for path in files:
        table_of(path)


@pytest.mark.parametrize('path', node_params_files(), ids=lambda p: p.name)
def test_shipped_params_files_agree_with_the_specs(path: Path):
    """Every key a parameter the node declares (dynamic ``controllers.<name>.*``, ``constraints.*`` by
    pattern), every value accepted by its spec, and no default restated unless pinned (with why)."""
    table, text = table_of(path), path.read_text()
    lines = key_lines(text)
    for node, body in yaml.safe_load(text).items():
        values = dict(flat(body['ros__parameters'] or {}))
        assert values, f'{path.name}: {node} sets nothing'
        for name, value in values.items():
            spec = spec_for(name, table)
            assert spec is not None, f'{path.name}: {name} is no parameter of {table.node}'
            problem = params.check_value(spec, value)
            assert problem is None, f'{path.name}: {problem}'
            if '<' not in spec.name and value == spec.default:
                assert pinned(name, lines), (f'{path.name}: {name}: {value!r} is the default of its spec; remove '
                                             'it, or say on its line why the file pins it ("pinned: ...")')


def test_the_pin_check_reads_nested_keys_and_their_comments():
    text = ('/**/n:\n  ros__parameters:\n    a: 1   # pinned: why\n    b:            # pinned: all of b\n'
            '      c: 2\n    text: |\n      x: 1\n    d: [p,\n        q]\n    e: 0.5   # s\n')
    lines = key_lines(text)
    assert sorted(lines) == ['a', 'b', 'b.c', 'd', 'e', 'text']
    assert pinned('a', lines) and pinned('b.c', lines) and not pinned('e', lines) and not pinned('text', lines)


def test_the_shipped_constraints_are_accepted_by_their_specs():
    defaults = params.load_constraints()
    joints = [k for k in defaults if k not in ('goal_time', 'stopped_velocity_tolerance')]
    for spec in params.constraint_specs(joints, defaults):
        assert params.check_value(spec, spec.default) is None, spec.name


# -- ros2 param describe ---------------------------------------------------------------------------------
#: Parameters of the sim bridge whose descriptors are compared: a read-only integer range, a double
#: with unit and range, allowed strings, a read-only bool, a string list.
DESCRIBED = ('thread_priority', 'publish_rate', 'effort_unit', 'publish_clock', 'speed_scaled_joints',
             'reload_max_bytes', 'cmd_vel_timeout')


def ros2_param_cli() -> list[str] | None:
    """The ``ros2 param`` command, where the ros2param verb is installed (it is not on PyPI)."""
    ros2 = shutil.which('ros2') or str(Path(params.__file__).parents[2] / '.venv' / 'bin' / 'ros2')
    if importlib.util.find_spec('ros2param') is None or not Path(ros2).exists():
        return None
    return [ros2, 'param']


@pytest.fixture(scope='module')
def spec_bridge(ros, tmp_path_factory):
    """The sim bridge, all parameters at their defaults, in its own process on this run's ROS domain
    (node ``/param_specs/spec_bridge``, its own topics); yields the node's name."""
    helpers, _ = ros
    proc = helpers.NodeProcess('mujoco_bridge.main', ['-r', '__node:=spec_bridge', '-r', '__ns:=/param_specs',
                                                      '-p', 'joint_states_topic:=/param_specs/joint_states',
                                                      '-p', 'action_name:=/param_specs/follow_joint_trajectory'],
                               tmp_path_factory.mktemp('spec_bridge') / 'bridge.log')
    try:
        assert helpers.wait_until(lambda: 'ready: stepping' in proc.output() or not proc.alive(), START_TIMEOUT), \
            proc.output()[-3000:]
        yield '/param_specs/spec_bridge'
    finally:
        assert proc.stop() == 0, proc.output()[-3000:]


def bridge_specs() -> dict[str, params.ParameterSpec]:
    import mujoco_bridge.parameters as bridge
    return {spec.name: spec for spec in bridge.SPECS}


def test_a_running_node_describes_its_parameters_as_the_specs_say(ros, spec_bridge):
    """The node's ``~/describe_parameters`` answer, which ``ros2 param describe`` prints, is each
    spec's descriptor: description with unit and range, range, allowed values, read-only, type."""
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import DescribeParameters
    _, client = ros
    specs = bridge_specs()
    answer = client.call(DescribeParameters, f'{spec_bridge}/describe_parameters',
                         DescribeParameters.Request(names=list(DESCRIBED)), timeout=START_TIMEOUT)
    types = {float: ParameterType.PARAMETER_DOUBLE, int: ParameterType.PARAMETER_INTEGER,
             bool: ParameterType.PARAMETER_BOOL, str: ParameterType.PARAMETER_STRING,
             list: ParameterType.PARAMETER_STRING_ARRAY}
    assert sorted(d.name for d in answer.descriptors) == sorted(DESCRIBED)
    for described in answer.descriptors:
        spec = specs[described.name]
        expected = spec.descriptor()
        assert described.description == spec.full_description() == expected.description
        assert spec.unit == '' or f' Unit: {spec.unit}.' in described.description
        assert spec.bounds is None or f' Range {spec.bounds[0]:g}..{spec.bounds[1]:g}.' in described.description
        assert described.read_only == spec.read_only, spec.name
        assert described.type == types[type(spec.default)], spec.name
        assert described.additional_constraints == expected.additional_constraints, spec.name
        assert [(r.from_value, r.to_value) for r in described.integer_range] == \
            [(r.from_value, r.to_value) for r in expected.integer_range], spec.name


def test_ros2_param_describe_prints_what_the_specs_say(request):
    """The real CLI, where ``ros2param`` is installed (it is not on PyPI: the venv's ros2 lacks the
    ``param`` verb, and the test above checks the service the CLI calls)."""
    cli = ros2_param_cli()
    if cli is None:
        pytest.skip('the ros2 param CLI (ros2param) is not installed')
    spec_bridge = request.getfixturevalue('spec_bridge')
    specs = bridge_specs()
    out = subprocess.run([*cli, 'describe', '--no-daemon', spec_bridge, *DESCRIBED], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    for name in DESCRIBED:
        block = out.split(f'Parameter name: {name}\n', 1)[1].split('Parameter name:', 1)[0]
        assert specs[name].full_description() in ' '.join(block.split()), block
        assert ('Read only: true' in block) == specs[name].read_only, block
        bounds = specs[name].bounds
        if bounds is not None and isinstance(specs[name].default, int):
            assert f'Min value: {bounds[0]}' in block and f'Max value: {bounds[1]}' in block, block


# -- typed settings ----------------------------------------------------------------------------------------
def node_settings() -> list[tuple[str, tuple, object]]:
    """(node, its specs, read(get) -> its typed settings) of every node."""
    import calibration_node.parameters as calibration
    import mujoco_bridge.parameters as bridge
    from shadow_twin.ros.monitor import parameters as monitor
    from shadow_twin.ros.twin import parameters as twin
    return [('mujoco_bridge', bridge.SPECS, lambda get: bridge.read_settings(get, {})),
            ('shadow_twin', twin.SPECS, lambda get: twin.read_settings(get, {}, True, 'both')),
            ('twin_monitor', monitor.SPECS, monitor.read_settings),
            ('calibration_node', calibration.SPECS, calibration.CalibrationNodeSettings.read)]


@pytest.mark.parametrize('node, specs, read', node_settings(), ids=lambda v: v if isinstance(v, str) else '')
def test_each_nodes_typed_settings_read_its_declared_defaults(make_node, node, specs, read):
    ros_node = make_node(node)
    params.declare(ros_node, specs)
    settings = read(getter(ros_node))
    assert isinstance(settings, Settings) and dataclasses.is_dataclass(settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(settings, attribute_name(specs[0].name), specs[0].default)
    held = {spec.name for spec in type(settings).SPECS}
    for spec in specs:
        if spec.name not in held or attribute_name(spec.name) in type(settings).DERIVED:
            continue                     # the twin's base.* parameters: its BaseSettings (test below)
        value = settings.value(spec.name)
        if attribute_name(spec.name) in type(settings).PARSED:
            assert value == spec.check(spec.default), spec.name
            continue
        assert type(value) is value_type(spec), spec.name
        assert value == (tuple(spec.default) if isinstance(spec.default, list) else spec.default), spec.name


def test_the_twins_settings_hold_what_it_derives(make_node):
    from shadow_twin.ros.twin import parameters as twin
    from shadow_twin.ros.twin.base.settings import BaseSettings
    node = make_node('twin', velocity_limits='{rh_FFJ3: 2}', preview='auto', start_lead=1)
    params.declare(node, twin.SPECS)
    settings = twin.read_settings(getter(node), {'goal_time': 2.0}, True, 'sim')
    assert settings.velocity_limits == {'rh_FFJ3': 2.0} and settings.constraints == {'goal_time': 2.0}
    assert isinstance(settings.base, BaseSettings) and settings.preview == 'off'      # auto in mode sim
    assert settings.start_lead == 1.0 and isinstance(settings.start_lead, float)     # an integer given
    assert twin.read_settings(getter(node), {}, False, 'both').base is None
    # the base.* parameters are held once, as the BaseSettings the code reads
    assert not [f for f in twin.TwinSettings.__dataclass_fields__ if f.startswith('base_')]
    specs = {spec.name: spec.default for spec in twin.SPECS}
    assert settings.base.limits.max_speed == specs['base.limits.max_speed']
    assert settings.base.anchor_offsets == (specs['base.anchor.position_offset'], specs['base.anchor.yaw_offset'])
    assert twin.read_settings(getter(node), {}, False, 'both').preview == 'enforce'


# -- a one-line change -------------------------------------------------------------------------------------
BUDGET_LINE = "    ParameterSpec('budget', 60, 'Rollouts (simulations) of the optimiser.', bounds=(1, 100000)),\n"
CHANGED_LINE = ("    ParameterSpec('budget', 80, 'Rollouts (simulations) of the optimiser.', bounds=(1, 500), "
                "unit='rollouts'),\n")


def changed_module(tmp_path: Path):
    """calibration_node/parameters.py with its budget line changed (default 60 -> 80, bounds to
    1..500, unit 'rollouts'), imported under another name."""
    source = (REPO / 'calibration_node' / 'parameters.py').read_text()
    assert source.count(BUDGET_LINE) == 1, 'the budget spec is no longer one line: update this test'
    path = tmp_path / 'changed_calibration_parameters.py'
    path.write_text(source.replace(BUDGET_LINE, CHANGED_LINE))
    module_spec = importlib.util.spec_from_file_location('changed_calibration_parameters', path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def test_a_one_line_change_of_a_spec_is_followed_everywhere(make_node, tmp_path, monkeypatch, capsys):
    import calibration_node.parameters as calibration
    changed = changed_module(tmp_path)
    spec = next(s for s in changed.SPECS if s.name == 'budget')
    assert (spec.default, spec.bounds, spec.unit) == (80, (1, 500), 'rollouts')
    # the typed settings: the new default, and the new bounds enforced when read
    node = make_node('changed')
    params.declare(node, changed.SPECS)
    settings = changed.CalibrationNodeSettings.read(getter(node))
    assert settings.budget == 80 and type(settings).__doc__.count('budget (rollouts): ') == 1
    with pytest.raises(ConfigError, match='budget must be within 1..500, got 600'):
        changed.CalibrationNodeSettings.read(lambda name: 600 if name == 'budget' else node.get_parameter(name).value)
    # the descriptor: what the node declares (and ros2 param describe shows), and the validation
    descriptor = node.describe_parameter('budget')
    assert 'Unit: rollouts. Range 1..500.' in descriptor.description
    assert (descriptor.integer_range[0].from_value, descriptor.integer_range[0].to_value) == (1, 500)
    with pytest.raises(ConfigError, match='budget must be within 1..500'):
        params.declare(make_node('too_many', budget=600), changed.SPECS)
    # the generated page: the node module's table is what the generator reads
    monkeypatch.setattr(calibration, 'SPECS', changed.SPECS)
    page = parameter_docs.render(docs_cli.node_tables(), docs_cli.COMMAND)
    assert '| `budget` | integer | `80` | 1 .. 500 | rollouts |  | Rollouts (simulations) of the optimiser. |' in page
    assert parameter_docs.main(docs_cli.node_tables, docs_cli.COMMAND, ['--check']) == 1
    assert docs_cli.COMMAND in capsys.readouterr().err
