"""Benchmark of issue 12: the cell calibrated live with the study's protocol, then offline from its bags.

1. Writes the stand-ins' models and parameters into ``--out``: a cell config whose drives have a
   torque limit (``base.wheel_torque_limit``, default 20 N m at the wheel: with it the rotor inertia
   shows in the path; the twin and the stand-in share it) and a command latency
   (``base.command_latency``, :data:`COMMAND_LATENCY`: the stand-in applies each velocity command
   that long after its stamp, as the replay does, and the twin's base followers compensate it), and
   one stand-in for the UR5 and the MiR250 together (``write_base_stand_in_mjcf(arm_moves=True)``:
   base, cabinet, the arm on its servos and the hand's mass, so that the base feels the arm move as
   the real cell's does), run by one bridge that serves the UR driver's action, ``/joint_states``
   and speed scaling and the MiR bridge's ``/cmd_vel`` and ``/odom``, with known perturbations of the
   sim's values (:data:`PERTURBATIONS`): arm damping x25 on the large joints and friction loss x10 on
   the wrists; wheel-floor friction x0.6 and rotor inertia (wheel armature) x1.5. No stand-in for
   the hand: the protocol does not move it (its mass rides on the stand-in's flange).
2. Starts ``shadow-twin up --cell --no-monitor`` (the sim bridge and the twin server), the
   stand-in and a ``calibration_node`` with ``protocol:=cell`` on a private ROS domain, and
   calibrates live (``shadow-twin calibrate-live``): the protocol's runs through the twin,
   screening, fits, validation before and after, install.
3. Calibrates again offline from the recorded bags (``shadow-twin calibrate --protocol cell``) with
   the same cell model and compares the validation errors after calibration (target: within 10 %).

Prints per validation run the path error before and after (m^2, the study's objective) and the
screening rankings; targets: every validation run at least 80 % lower, every perturbed parameter
within the four most influential of its group, the whole benchmark under 15 min, offline within
10 % of live. The last line is one JSON object ``{"validation": {RUN: {"before", "after"}},
"sensitivity": {"arm": [...], "base": [...]}, "perturbed": [...]}`` (plus the offline figures and
the verdicts). Also prints how many sends each run's recording took (``recording_attempts.json``)
and fails when any goal was refused for lateness ("stamped start passed" in a node's log). Exit 0
when every target is met, 1 otherwise.

    .venv/bin/python benchmarks/calibrate_cell.py [--out DIR] [--torque-limit N_M]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from shadow_twin.calibration.jobs.plan import ATTEMPTS  # noqa: E402
from shadow_twin.cli.processes import ChildProcesses  # noqa: E402
from shadow_twin.common.paths import config_path  # noqa: E402
from shadow_twin.model.cell.assembly import CellConfig, write_cell_mjcf  # noqa: E402
from shadow_twin.model.mock_models import write_base_stand_in_mjcf  # noqa: E402
from shadow_twin.ros.dds import isolate_domain  # noqa: E402

#: {parameter of the protocol's search spaces: (group, bridge override globs, attribute, factor)}.
PERTURBATIONS = {
    'large_damping': ('arm', ('*shoulder_pan_joint', '*shoulder_lift_joint', '*elbow_joint'), 'damping', 25.0),
    'wrist_frictionloss': ('arm', ('*wrist_?_joint',), 'frictionloss', 10.0),
    'wheel_friction': ('base', ('geom:[lr]*_wheel_contact',), 'friction', 0.6),
    'wheel_armature': ('base', ('[lr]*_wheel_joint',), 'armature', 1.5),
}
#: The twin's base goal tolerances for the stand-ins' slippery floor (config/twin_cell.yaml: 0.05 m,
#: 0.05 rad): a protocol run is meant to make the wheels slip, and a slip leaves a lateral error at
#: the end that a differential drive cannot undo (measured: 0.062 m after CN1; 0.15 m after IN2 and
#: 0.26 m after CN2 in other runs), so the twin would abort the run. A lab with such a floor sets its
#: twin's tolerances the same way.
BASE_GOAL_TOLERANCES = {'goal_position': 0.5, 'goal_yaw': 0.5}
#: One bridge stands in for the UR5 and the MiR250: ``mock_ur.yaml``'s parameters (the UR driver's action,
#: /joint_states at 125 Hz, speed scaling) with ``mock_mir.yaml``'s base topics. Two stand-ins, the MiR250's
#: arm following the UR5's /joint_states, missed the arm's motion by up to 0.4 rad when their processes
#: were starved on this machine's 2 shared cores, and its base then moved apart from any replay (IY: the
#: stand-in's own values replayed on its recording missed it by 104 % of the uncalibrated error).
BASE_STAND_IN_KEYS = ('cmd_vel_topic', 'cmd_vel_timeout', 'odom_topic', 'odom_rate', 'odom_frame', 'base_frame',
                      'publish_tf')
#: The twin's joint state and odometry timeouts for this loaded machine (config/twin_cell.yaml: 0.2 s,
#: 0.5 s): a starved stand-in paused its /joint_states for 0.26 s and the twin took the UR as gone.
TWIN_TIMEOUTS = {'joint_state_timeout': 1.0, 'odom_timeout': 1.0}
#: The drives' command latency, s (``base.command_latency``: a cmd_vel takes effect this long after its
#: stamp; the twin's sim, the stand-in and the replay share it, and the twin's base followers compensate
#: it). Without one the stand-in applied each command when its process got the CPU: on this machine's 2
#: shared cores its ticks ran 10-50 ms late, and where the wheels slip such shifts moved a run's path by
#: up to 60 mm, as much as the perturbations do. With 0.1 s, 54 commands of one benchmark run arrived
#: 103-127 ms after their stamps (the stand-in logs them), 30 of them in IY, whose recording the
#: stand-in's own values then missed by 89 % of the uncalibrated error (the other runs: 0.0-0.3 %).
COMMAND_LATENCY = 0.25
#: The stand-ins catch up this much sim time after a stall before they drop any (``max_catch_up``; the
#: shipped 0.1 s suits a twin someone watches): a stand-in that drops sim time shifts its clock against
#: the stamps of every later command and state by the dropped amount, as no real robot does (measured
#: with 0.1 s on this machine's 2 shared cores: the MiR250 stand-in dropped 0.59 s and the UR5 stand-in
#: 0.11 s in one run).
STAND_IN_MAX_CATCH_UP = 1.0
#: Node name of the UR5 + MiR250 stand-in.
STAND_IN_NODE = 'mock_ur_mir'
TIME_LIMIT = 15 * 60.0
MIN_REDUCTION = 80.0
OFFLINE_TOLERANCE = 0.10


def stand_in_params(model: Path) -> dict:
    """The UR5 + MiR250 stand-in's parameters (see :data:`BASE_STAND_IN_KEYS`): its model, every
    perturbation as an override, and :data:`STAND_IN_MAX_CATCH_UP`."""
    def params_of(template: str) -> dict:
        return dict(next(iter(yaml.safe_load(config_path(template).read_text()).values()))['ros__parameters'])
    params = params_of('mock_ur.yaml')
    base = params_of('mock_mir.yaml')
    params.update({key: base[key] for key in BASE_STAND_IN_KEYS})
    params['model_path'] = str(model)
    rules: dict = {}
    for _, globs, attribute, factor in PERTURBATIONS.values():
        for glob in globs:
            rules.setdefault(glob, {})[attribute] = f'x{factor:g}'
    params['overrides'] = yaml.safe_dump(rules, default_flow_style=True)
    params['max_catch_up'] = STAND_IN_MAX_CATCH_UP
    return {f'/**/{STAND_IN_NODE}': {'ros__parameters': params}}


def write_inputs(out: Path, torque_limit: float) -> dict[str, Path]:
    """Cell config, stand-in model and parameters, twin and calibration node parameters; {name: path}."""
    cell = yaml.safe_load(config_path('cell.yaml').read_text())
    cell['cell']['base']['wheel_torque_limit'] = torque_limit
    cell['cell']['base']['command_latency'] = COMMAND_LATENCY
    files = {'cell_config': out / 'cell.yaml'}
    files['cell_config'].write_text(yaml.safe_dump(cell, sort_keys=False))
    config = CellConfig.from_yaml(files['cell_config'])
    # the arm starts at qpos0, as the twin's sim does
    files['stand_in_model'] = write_base_stand_in_mjcf(config, out / 'models' / 'ur5_mir250_stand_in.xml',
                                                       arm_moves=True)
    files['cell_model'], _ = write_cell_mjcf(config, out / 'models' / 'cell.xml')
    files['stand_in'] = out / f'{STAND_IN_NODE}.yaml'
    files['stand_in'].write_text(yaml.safe_dump(stand_in_params(files['stand_in_model']), sort_keys=False))
    twin = yaml.safe_load(config_path('twin_cell.yaml').read_text())
    params = next(iter(twin.values()))['ros__parameters']
    params['joint_state_timeout'] = TWIN_TIMEOUTS['joint_state_timeout']
    params['base']['odom_timeout'] = TWIN_TIMEOUTS['odom_timeout']
    params['base']['tolerances'].update(BASE_GOAL_TOLERANCES)
    params['base']['command_latency'] = COMMAND_LATENCY          # the twin's followers compensate the dead time
    files['twin'] = out / 'twin_cell.yaml'
    files['twin'].write_text(yaml.safe_dump(twin, sort_keys=False))
    files['calibration_node'] = out / 'calibration_node.yaml'
    files['calibration_node'].write_text(yaml.safe_dump({'/**/calibration_node': {'ros__parameters': {
        'protocol': 'cell', 'output_dir': str(out / 'calibration'), 'workers': 2}}}))
    return files


def live(out: Path, files: dict[str, Path]) -> Path:
    """Start the cell and the calibration node, calibrate live; returns the run directory."""
    python = sys.executable
    (out / 'logs').mkdir(parents=True, exist_ok=True)
    processes = ChildProcesses(out / 'logs')
    # the sim bridge and the twin server; without the twin monitor (a calibration does not use it): it
    # takes about half of one of the 2 cores
    processes.start('cell', [python, '-m', 'shadow_twin.cli.main', 'up', '--cell', '--no-monitor',
                             '--cell-config', str(files['cell_config']), '--config', str(files['twin'])])
    processes.start(STAND_IN_NODE, [python, '-m', 'mujoco_bridge.main', '--ros-args', '--params-file',
                                    str(files['stand_in']), '-r', f'__node:={STAND_IN_NODE}'])
    processes.start('calibration_node', [python, '-m', 'calibration_node.node', '--ros-args', '--params-file',
                                         str(config_path('calibration_node.yaml')), '--params-file',
                                         str(files['calibration_node'])])
    try:
        time.sleep(15.0)    # the cell's processes start and discover each other
        run = subprocess.run([python, '-m', 'shadow_twin.cli.main', 'calibrate-live', '--service-timeout', '60',
                              '--timeout', str(TIME_LIMIT)], cwd=REPO, text=True, capture_output=True)
        print(run.stdout[-6000:], flush=True)
        if run.returncode not in (0, 3):
            print(run.stderr[-3000:])
            raise RuntimeError(f'calibrate-live exited with {run.returncode} (logs in {out / "logs"})')
    finally:
        processes.stop()
    runs = sorted(p for p in (out / 'calibration').iterdir() if (p / 'result.json').exists())
    if not runs:
        raise RuntimeError(f'no finished calibration run in {out / "calibration"}')
    return runs[-1]


def offline(out: Path, run_dir: Path, files: dict[str, Path]) -> dict:
    """``shadow-twin calibrate --protocol cell`` on the live run's bags; its result.json."""
    target = out / 'offline'
    run = subprocess.run([sys.executable, '-m', 'shadow_twin.cli.main', 'calibrate', '--protocol', 'cell', '--bags',
                          str(run_dir / 'bags'), '--model', str(files['cell_model']), '--out', str(target)],
                         cwd=REPO, text=True, capture_output=True)
    print(run.stdout[-4000:], flush=True)
    if run.returncode not in (0, 3):
        print(run.stderr[-3000:])
        raise RuntimeError(f'offline calibrate exited with {run.returncode}')
    return json.loads((target / 'result.json').read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', type=Path, default=None, help='output folder (default: a new temporary one)')
    parser.add_argument('--torque-limit', type=float, default=20.0, help='wheel torque limit, N m (default 20)')
    parser.add_argument('--domain-id', type=int, default=None)
    args = parser.parse_args()
    started = time.monotonic()
    out = args.out or Path(tempfile.mkdtemp(prefix='calibrate_cell_'))
    out.mkdir(parents=True, exist_ok=True)
    domain = isolate_domain(args.domain_id)
    print(f'== Cell calibration benchmark: output {out}, ROS_DOMAIN_ID {domain}', flush=True)
    files = write_inputs(out, args.torque_limit)
    run_dir = live(out, files)
    result = json.loads((run_dir / 'result.json').read_text())
    live_wall = time.monotonic() - started
    offline_result = offline(out, run_dir, files)
    wall = time.monotonic() - started
    validation = {run: {'before': v['before'], 'after': v['after']} for run, v in result['validation'].items()}
    sensitivity = result['sensitivity']
    perturbed = list(PERTURBATIONS)
    print(f'== live run {run_dir} ({live_wall:.0f} s): {"accepted" if result["accept"] else "refused"}: '
          f'{result["reason"]}')
    ok = True
    for run, v in validation.items():
        reduction = 100.0 * (1.0 - v['after'] / v['before']) if v['before'] > 0 else 0.0
        passed = reduction >= MIN_REDUCTION
        ok &= passed
        print(f'   {run}: path error {v["before"]:.4g} -> {v["after"]:.4g} m^2 ({reduction:.1f} % lower; target >= '
              f'{MIN_REDUCTION:g} %) {"PASS" if passed else "FAIL"}')
    for name in perturbed:
        group = PERTURBATIONS[name][0]
        rank = sensitivity[group].index(name) + 1 if name in sensitivity[group] else None
        passed = rank is not None and rank <= 4
        ok &= passed
        print(f'   {name} ({group}, x{PERTURBATIONS[name][3]:g}): rank {rank} of {len(sensitivity[group])} in the '
              f'screening (target <= 4) {"PASS" if passed else "FAIL"}')
    offline_validation = {run: {'before': v['before'], 'after': v['after']}
                          for run, v in offline_result['validation'].items()}
    for run, v in validation.items():
        off = offline_validation[run]['after']
        gap = abs(off - v['after']) / v['after'] if v['after'] > 0 else 0.0
        passed = gap <= OFFLINE_TOLERANCE
        ok &= passed
        print(f'   offline {run}: after {off:.4g} m^2 vs live {v["after"]:.4g} ({100 * gap:.1f} % apart; target <= '
              f'{100 * OFFLINE_TOLERANCE:g} %) {"PASS" if passed else "FAIL"}')
    attempts = json.loads((run_dir / ATTEMPTS).read_text())
    print('   attempts per run: ' + ', '.join(f'{run} {n}' for run, n in attempts.items()))
    late = [line.strip() for log in sorted((out / 'logs').glob('*.log'))
            for line in log.read_text(errors='replace').splitlines() if 'stamped start passed' in line]
    passed = not late
    ok &= passed
    print(f'   goals refused for lateness: {len(late)} (target 0) {"PASS" if passed else "FAIL"}')
    for line in late[:5]:
        print(f'     {line[-200:]}')
    passed = wall < TIME_LIMIT
    ok &= passed
    print(f'   wall time {wall:.0f} s (live {live_wall:.0f} s; target < {TIME_LIMIT:.0f} s) {"PASS" if passed else "FAIL"}')
    print(json.dumps({'validation': validation, 'sensitivity': sensitivity, 'perturbed': perturbed,
                      'offline_validation': offline_validation, 'wall_time_s': round(wall, 1),
                      'accepted': result['accept'], 'attempts': attempts, 'late_refusals': len(late),
                      'pass': bool(ok)}))
    return 0 if ok else 1


if __name__ == '__main__':
    os.chdir(REPO)
    sys.exit(main())
