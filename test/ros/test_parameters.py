"""shadow_twin.ros.parameters: one declaration per parameter, enforced at declaration and at
runtime (integers too), its unit in the descriptor, the typed settings made from a table
(shadow_twin.ros.settings), and the one shared constraints file. What is made from each node's
table (docs, shipped files, a running node's descriptors): test_parameter_specs.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

rclpy = pytest.importorskip('rclpy')
from rclpy.parameter import Parameter  # noqa: E402

from shadow_twin.common.errors import ConfigError  # noqa: E402
from shadow_twin.ros import parameters as params  # noqa: E402
from shadow_twin.ros.settings import settings_class, typed_value  # noqa: E402
from shadow_twin.simulation.overrides import ParameterOverrides  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SPECS = (
    params.ParameterSpec('seed', 0, 'Random seed.', bounds=(0, 2**31 - 1)),
    params.ParameterSpec('rate', 50.0, 'Rate.', bounds=(1.0, 1000.0), unit='Hz'),
    params.ParameterSpec('optimizer', 'bo', 'Optimiser.', choices=('bo', 'random')),
    params.ParameterSpec('overrides', '', 'YAML overrides.', check=ParameterOverrides.from_yaml_text),
    params.ParameterSpec('sub.topics', ['/a'], 'Topics.', read_only=True),
)


@pytest.fixture()
def make_node():
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=0)
    nodes = []

    def make(**overrides):
        node = rclpy.create_node(f'param_test_{len(nodes)}', context=context, start_parameter_services=False,
                                 parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        nodes.append(node)
        return node
    yield make
    for node in nodes:
        node.destroy_node()
    rclpy.try_shutdown(context=context)


@pytest.mark.parametrize('overrides, match', [
    ({'seed': -1}, 'seed must be within 0..2.14748e\\+09, got -1'),
    ({'seed': 1.5}, 'seed'),
    ({'rate': 0.5}, 'rate must be within 1..1000'),
    ({'rate': float('nan')}, 'rate must be a finite number'),
    ({'rate': 'fast'}, 'rate must be a finite number'),
    ({'optimizer': 'gradient'}, 'optimizer must be one of bo, random'),
    ({'overrides': 'rh_FFJ1: {damping: [1]}'}, 'parameter overrides:'),
])
def test_bad_values_stop_the_declaration_naming_the_parameter(make_node, overrides, match):
    with pytest.raises(ConfigError, match=match):
        params.declare(make_node(**overrides), SPECS)


def test_good_values_are_declared_with_descriptions_and_ranges(make_node):
    node = make_node(seed=7, rate=1000, optimizer='random')    # an int for a float parameter is fine
    params.declare(node, SPECS)
    assert node.get_parameter('seed').value == 7 and node.get_parameter('rate').value == 1000
    descriptor = node.describe_parameter('seed')
    assert 'Random seed.' in descriptor.description and 'Range 0..' in descriptor.description
    assert descriptor.integer_range[0].from_value == 0 and descriptor.integer_range[0].to_value == 2**31 - 1
    assert 'One of: bo, random' in node.describe_parameter('optimizer').description
    assert node.describe_parameter('rate').description == 'Rate. Unit: Hz. Range 1..1000.'
    assert node.describe_parameter('sub.topics').read_only


def test_typed_settings_convert_check_and_freeze_the_values(make_node):
    Typed = settings_class('Typed', SPECS, derived={'rate': float, 'extra': dict})
    node = make_node(seed=7, rate=1000)
    params.declare(node, SPECS)
    settings = Typed.read(lambda name: node.get_parameter(name).value, rate=2.0, extra={'a': 1})
    assert (settings.seed, settings.optimizer, settings.sub_topics) == (7, 'bo', ('/a',))
    assert settings.rate == 2.0 and settings.extra == {'a': 1}         # derived fields replace or add
    assert settings.value('sub.topics') == ('/a',) and Typed.DERIVED == ('rate', 'extra')
    assert 'sub_topics: parameter ``sub.topics``. Topics.' in Typed.__doc__
    with pytest.raises(AttributeError):
        settings.seed = 1
    assert typed_value(SPECS[1], 1000) == 1000.0 and isinstance(typed_value(SPECS[1], 1000), float)
    with pytest.raises(ConfigError, match='seed must be within'):
        typed_value(SPECS[0], -1)
    with pytest.raises(TypeError):
        Typed.read(lambda name: node.get_parameter(name).value, rate=2.0)        # a derived field missing
    with pytest.raises(ValueError, match='a.b and a_b are both the attribute a_b'):
        settings_class('Clash', (params.ParameterSpec('a.b', 1, ''), params.ParameterSpec('a_b', 2, '')))


def test_a_parsed_parameter_holds_its_checks_result_parsed_once():
    parses = []

    def parse(text):
        parses.append(text)
        if not text.startswith('{'):
            raise ConfigError('not a mapping')
        return {'parsed': text}
    specs = (params.ParameterSpec('limits', '{}', 'Limits.', check=parse), params.ParameterSpec('rate', 1.0, 'Rate.'))
    Parsed = settings_class('Parsed', specs, parsed={'limits': dict})
    settings = Parsed.read({'limits': '{a: 1}', 'rate': 2}.get)
    assert settings.limits == {'parsed': '{a: 1}'} and parses == ['{a: 1}'] and Parsed.PARSED == ('limits',)
    assert 'limits: parameter ``limits``, parsed. Limits.' in Parsed.__doc__
    with pytest.raises(ConfigError, match='parameter limits: not a mapping'):
        Parsed.read({'limits': 'a: 1', 'rate': 2}.get)
    with pytest.raises(ConfigError, match='limits must be a str'):
        Parsed.read({'limits': 5, 'rate': 2}.get)                  # the type is checked before the parse
    with pytest.raises(ValueError, match="without a spec that parses them: \\['rate'\\]"):
        settings_class('Bad', specs, parsed={'rate': float})


def test_runtime_changes_are_checked_as_at_declaration(make_node):
    node = make_node()
    params.declare(node, SPECS)
    refused = node.set_parameters([Parameter('seed', value=-5)])[0]
    assert not refused.successful and 'seed' in refused.reason
    refused = node.set_parameters([Parameter('optimizer', value='nope')])[0]
    assert not refused.successful and 'optimizer must be one of' in refused.reason
    assert node.set_parameters([Parameter('rate', value=20)])[0].successful
    assert node.get_parameter('seed').value == 0


def test_shipped_constraints_file_is_the_only_constraints_block():
    shipped = params.load_constraints()
    assert shipped['goal_time'] == 2.0 and shipped['rh_FFJ3'] == {'trajectory': 0.0, 'goal': 0.05}
    for name in ('mujoco_bridge.yaml', 'mock_hardware.yaml', 'twin.yaml'):
        text = (REPO / 'config' / name).read_text()
        node = next(iter(yaml.safe_load(text).values()))['ros__parameters']
        assert 'constraints' not in node and node.get('constraints_file', '') == '', name


def test_constraint_specs_take_their_defaults_from_the_file(make_node, tmp_path):
    node = make_node(**{'constraints.rh_FFJ3.goal': 0.2})          # a params file still overrides
    params.declare(node, params.constraint_specs(['rh_FFJ3', 'rh_FFJ2'], params.load_constraints()))
    config = params.constraints_config(node, ['rh_FFJ3', 'rh_FFJ2'])
    assert config == {'goal_time': 2.0, 'stopped_velocity_tolerance': 0.05,
                      'rh_FFJ3': {'trajectory': 0.0, 'goal': 0.2}, 'rh_FFJ2': {'trajectory': 0.0, 'goal': 0.0}}
    assert params.unknown_constraint_joints(params.load_constraints(), ['rh_FFJ3']) == sorted(
        k for k in params.load_constraints() if k.startswith('rh_') and k != 'rh_FFJ3')


def test_bad_constraints_files_are_refused_naming_the_file(tmp_path):
    with pytest.raises(ConfigError, match='cannot read the constraints file'):
        params.load_constraints(tmp_path / 'missing.yaml')
    flat = tmp_path / 'flat.yaml'
    flat.write_text('constraints: {goal_time: 1.0}\n')
    with pytest.raises(ConfigError, match="must hold '/\\*\\*: ros__parameters: constraints"):
        params.load_constraints(flat)
    text = tmp_path / 'text.yaml'
    text.write_text("/**:\n  ros__parameters:\n    constraints: {rh_FFJ3: {goal: wide}}\n")
    with pytest.raises(ConfigError, match='rh_FFJ3.goal must be a number'):
        params.constraint_specs(['rh_FFJ3'], params.load_constraints(text))
