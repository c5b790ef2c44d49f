"""``shadow-twin up``: the nodes it starts for the hand-only twin and for the cell (command
lines only; the processes themselves are exercised by the ROS and launch tests)."""

from __future__ import annotations

import mujoco
import pytest

from shadow_twin.cli import up
from shadow_twin.common.paths import config_path


def commands(*argv: str, cell_model=None) -> dict[str, list[str]]:
    return up.node_commands(up.build_parser().parse_args(list(argv)), [], cell_model)


def params_file(command: list[str]) -> str:
    return command[command.index('--params-file') + 1]


def test_hand_twin_nodes_are_unchanged():
    nodes = commands('--mock-hardware')
    assert list(nodes) == ['mujoco_bridge', 'mock_hardware', 'shadow_twin', 'twin_monitor']
    assert params_file(nodes['shadow_twin']) == str(config_path('twin.yaml'))
    assert not any('model_path' in arg for arg in nodes['mujoco_bridge'])


def test_cell_nodes_run_the_cell_model_and_three_stand_ins(tmp_path):
    cell = up.write_cell_model(None)
    try:
        assert mujoco.MjModel.from_xml_path(str(cell)).nu > 20          # it compiles on its own
        nodes = commands('--cell', '--mock-hardware', cell_model=cell)
    finally:
        import shutil
        shutil.rmtree(cell.parent)
    assert list(nodes) == ['mujoco_bridge', 'mock_ur', 'mock_hardware', 'mock_mir', 'shadow_twin', 'twin_monitor']
    sim = nodes['mujoco_bridge']
    assert f'model_path:={cell}' in sim and f'gains_file:={config_path("controllers", "cell.yaml")}' in sim
    assert f'joint_states_topic:={up.CELL_HAND_JOINT_STATES}' in nodes['mock_hardware']
    assert params_file(nodes['mock_ur']) == str(config_path('mock_ur.yaml'))
    assert params_file(nodes['mock_mir']) == str(config_path('mock_mir.yaml'))
    assert params_file(nodes['shadow_twin']) == str(config_path('twin_cell.yaml'))
    assert params_file(nodes['twin_monitor']) == str(config_path('twin_monitor_cell.yaml'))


def test_a_bad_cell_config_is_refused_with_exit_2(tmp_path, capsys):
    bad = tmp_path / 'cell.yaml'
    bad.write_text('cell: {base: {mass: -3}}\n')
    assert up.main(['--cell', '--cell-config', str(bad)]) == 2
    assert 'mass' in capsys.readouterr().err
    assert up.main(['--cell', '--cell-config', str(tmp_path / 'missing.yaml')]) == 2


def test_command_line_overrides_come_after_the_params_file():
    """ROS applies parameter overrides in order: a -p before --params-file would be overridden
    by the file's value (the sim then ran the built-in hand instead of the cell)."""
    nodes = commands('--cell', '--mock-hardware', '--mode', 'sim', cell_model=config_path('cell.yaml'))
    for name in ('mujoco_bridge', 'mock_hardware', 'shadow_twin'):
        command = nodes[name]
        assert command.index('--params-file') < min(k for k, arg in enumerate(command) if arg == '-p'), name


def test_shadow_mode_gives_the_sim_bridge_its_shadow_sources_after_its_own_params(tmp_path):
    hand = commands('--mode', 'shadow')
    files = [hand['mujoco_bridge'][k + 1] for k, arg in enumerate(hand['mujoco_bridge']) if arg == '--params-file']
    assert files == [str(config_path('mujoco_bridge.yaml')), str(config_path('mujoco_bridge_shadow.yaml'))]
    assert 'mode:=shadow' in hand['shadow_twin']
    assert str(config_path('twin_monitor_shadow.yaml')) in hand['twin_monitor']    # it watches the sources
    cell = commands('--cell', '--mode', 'shadow', cell_model=config_path('cell.yaml'))['mujoco_bridge']
    assert str(config_path('mujoco_bridge_shadow_cell.yaml')) in cell
    assert cell.index(str(config_path('mujoco_bridge_shadow_cell.yaml'))) < cell.index('-p')
    mine = tmp_path / 'shadow.yaml'
    mine.write_text('{}')
    assert str(mine) in commands('--mode', 'shadow', '--shadow-config', str(mine))['mujoco_bridge']
    with pytest.raises(FileNotFoundError, match='missing.yaml'):
        commands('--mode', 'shadow', '--shadow-config', str(tmp_path / 'missing.yaml'))
    assert 'shadow' not in ' '.join(commands('--mode', 'both')['mujoco_bridge'])


def test_no_monitor_leaves_the_monitor_out(capsys):
    nodes = commands('--cell', '--mock-hardware', '--no-monitor', cell_model=config_path('cell.yaml'))
    assert list(nodes) == ['mujoco_bridge', 'mock_ur', 'mock_hardware', 'mock_mir', 'shadow_twin']
    with pytest.raises(SystemExit) as exit_info:
        up.main(['--no-monitor', '--monitor-config', str(config_path('twin_monitor.yaml'))])
    assert exit_info.value.code == 2 and 'exclude each other' in capsys.readouterr().err


def test_children_stop_in_order_skipping_names_not_started(tmp_path):
    """``up --no-monitor`` stops its children with an order that names the monitor, which it did not
    start (a KeyError there made the command exit 1 after a clean run)."""
    import sys
    from shadow_twin.cli.processes import ChildProcesses
    children = ChildProcesses(tmp_path)
    for name in ('shadow_twin', 'bridge'):
        children.start(name, [sys.executable, '-c', 'import time; time.sleep(30)'])
    statuses = children.stop(order=['shadow_twin', 'twin_monitor'], timeout=5.0)
    assert set(statuses) == {'shadow_twin', 'bridge'} and all(s is not None for s in statuses.values())


@pytest.fixture
def quick_supervision(monkeypatch):
    """Supervision constants scaled down so that a test takes a second."""
    from shadow_twin.cli import processes
    monkeypatch.setattr(processes, 'STARTUP_WINDOW', 0.3)
    monkeypatch.setattr(processes, 'RESPAWN_DELAY', 0.05)
    monkeypatch.setattr(processes, 'RESPAWN_WINDOW', 60.0)
    monkeypatch.setattr(processes, 'MAX_RESPAWNS', 2)
    return processes


def _sleeper(seconds: float) -> list[str]:
    import sys
    return [sys.executable, '-c', f'import time; time.sleep({seconds})']


def test_a_dead_child_is_respawned_while_the_others_run_on(tmp_path, quick_supervision):
    children = quick_supervision.ChildProcesses(tmp_path)
    healthy = children.start('twin', _sleeper(60))
    children.start('mock_mir', _sleeper(0.6))
    lines: list[str] = []
    try:
        ended = children.supervise(lambda: sum('started again' in line for line in lines) >= 1,
                                   {'twin', 'mock_mir'}, lines.append, interval=0.02)
        assert ended is None
        assert healthy.poll() is None and children.procs['twin'] is healthy       # never restarted
        assert any(line.startswith('mock_mir exited with status 0; the other nodes run on') for line in lines)
        assert children.procs['mock_mir'].poll() is None                          # the respawned one runs
    finally:
        children.stop(timeout=2.0)


def test_a_child_that_dies_at_its_start_ends_the_supervision(tmp_path, quick_supervision):
    import sys
    children = quick_supervision.ChildProcesses(tmp_path)
    children.start('twin', _sleeper(60))
    children.start('bad', [sys.executable, '-c', 'raise SystemExit(1)'])
    try:
        name, status, why = children.supervise(lambda: False, {'twin', 'bad'}, lambda line: None, interval=0.02)
        assert (name, status) == ('bad', 1) and 'cannot start' in why
    finally:
        children.stop(timeout=2.0)


def test_a_crash_looping_child_is_given_up(tmp_path, quick_supervision):
    children = quick_supervision.ChildProcesses(tmp_path)
    children.start('loop', _sleeper(0.35))
    lines: list[str] = []
    try:
        name, status, why = children.supervise(lambda: False, {'loop'}, lines.append, interval=0.02)
        assert name == 'loop' and 'died 3 times' in why
        assert sum('started again' in line for line in lines) == 2
    finally:
        children.stop(timeout=2.0)


def test_without_respawn_a_dead_child_stays_dead_and_the_others_run_on(tmp_path, quick_supervision):
    children = quick_supervision.ChildProcesses(tmp_path)
    children.start('twin', _sleeper(60))
    children.start('mock_mir', _sleeper(0.5))
    lines: list[str] = []
    try:
        ended = children.supervise(lambda: bool(lines), set(), lines.append, interval=0.02)
        assert ended is None and 'not respawned' in lines[0]
        assert children.procs['twin'].poll() is None and children.procs['mock_mir'].poll() is not None
    finally:
        children.stop(timeout=2.0)
