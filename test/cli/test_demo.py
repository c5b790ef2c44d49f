"""``shadow-twin demo`` end to end (the README's main job) with a small budget: real processes
on a ROS domain of its own; the error on the unseen trajectory must fall. Skipped without rclpy
or control_msgs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]   # minutes: chosen with -m, see setup.cfg

REPO = Path(__file__).resolve().parents[2]


def demo(python, *args, timeout=600):
    return subprocess.run([python, '-m', 'shadow_twin.cli.main', 'demo', *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope='module')
def python():
    pytest.importorskip('rclpy')
    pytest.importorskip('control_msgs.action')
    from support import ros as ros_helpers
    return ros_helpers.PYTHON


def test_demo_lowers_the_error_on_the_unseen_trajectory(python, tmp_path):
    from support import ros as ros_helpers
    out = tmp_path / 'demo'
    run = demo(python, '--out', str(out), '--budget', '12', '--domain-id',
               str((ros_helpers.domain_id_for() + 50) % 101 + 1))   # not the test run's domain
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((out / 'demo_report.json').read_text())
    rows = {r['trajectory']: r for r in report['rows']}
    assert [r['role'] for r in report['rows']] == ['fitted', 'held out', 'unseen']
    unseen = rows['slow_grasp']
    assert unseen['after']['mse'] < 0.5 * unseen['before']['mse'], unseen
    assert unseen['before']['mse'] > 1e-4     # the mock hardware really differs from the sim
    assert report['calibration_result']['installed'] is True
    assert Path(report['calibration_result']['model']).is_file()
    # printed table and summary
    assert 'slow_grasp     unseen' in run.stdout and 'unseen trajectory slow_grasp: error' in run.stdout
    # plots of every recording, and the summary chart
    assert (out / 'error_before_after.png').stat().st_size > 10_000
    for name in ('curl_all', 'stagger', 'slow_grasp'):
        for when in ('before', 'after'):
            assert (out / 'plots' / f'{name}_{when}' / 'overview.png').is_file()
    # the calibration node's own report is there too
    assert (Path(report['calibration_run']) / 'report.json').is_file()


def test_demo_bad_arguments(python, tmp_path):
    run = demo(python, '--budget', '0', timeout=60)
    assert run.returncode == 2 and '--budget and --workers must be at least 1' in run.stderr
    (tmp_path / 'taken').mkdir()
    run = demo(python, '--out', str(tmp_path / 'taken'), timeout=60)
    assert run.returncode == 1 and 'exists; the demo never writes over earlier results' in run.stderr
    run = demo(python, '--out', str(tmp_path / 'x'), '--unseen', 'curl_all', timeout=60)
    assert run.returncode == 1 and 'is one of the calibration trajectories' in run.stderr
    run = demo(python, '--out', str(tmp_path / 'y'), '--unseen', 'no_such_trajectory', timeout=60)
    assert run.returncode == 1 and "no trajectory named 'no_such_trajectory'" in run.stderr
    assert not (tmp_path / 'x').exists() and not (tmp_path / 'y').exists()


def test_demo_cell_drives_arm_hand_and_base_and_shows_the_swing(python, tmp_path):
    """``shadow-twin demo --cell``: the one goal for the three robots succeeds with both bases at
    the arc's end; the arm swing moves the sim's base (arm and base in one model); the hand picks the
    scene's can up in the sim: it rises more than the stated height and stays there through the hold
    (measured with the sim bridge's GetEntityState), and is set down again."""
    from support import ros as ros_helpers
    out = tmp_path / 'cell'
    run = demo(python, '--cell', '--out', str(out), '--domain-id', str((ros_helpers.domain_id_for() + 30) % 101 + 1),
               timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((out / 'demo_cell_report.json').read_text())
    twin_log = (out / 'logs' / 'twin.log').read_text()
    assert report['goal']['error_code'] == 0, report['goal']['error_string'] + twin_log[-3000:]
    for topic, error in report['goal']['base_end'].items():
        assert error['position_error_m'] < 0.05 and error['yaw_error_rad'] < 0.05, (topic, error)
    assert max(abs(e) for e in report['goal']['joint_error_end_rad']['arm']) < 0.01
    assert report['swing']['error_code'] == 0
    assert report['swing']['base']['/sim/odom']['y_ptp_m'] >= 1e-3
    assert (out / 'base.png').stat().st_size > 10_000
    assert 'one goal: arm + hand' in run.stdout and 'arm swing' in run.stdout
    pick = report['pick']
    assert pick.get('error') is None, pick
    assert pick['object'] == 'can' and pick['error_code'] == 0, pick
    sim = pick['sides']['sim']
    assert sim['samples'] > 100                           # sampled through the goal (20 Hz, ~18 s)
    assert sim['picked_up'] is True and sim['lift_min_m'] > pick['picked_height_m'], sim
    assert sim['lift_max_m'] < pick['planned_lift_m'] + 0.02, sim        # it rose with the hand, no higher
    assert abs(sim['end_m']) < 0.01, sim                  # set down on the tote again
    assert 'mock' in pick['sides']                        # measured, or why not
    assert any(share and share > 0.5 for share in pick['contacts_during_hold']['sim'].values()), pick
    assert (out / 'object.png').stat().st_size > 10_000
    assert 'pick-up of the can: sim picked up' in run.stdout
