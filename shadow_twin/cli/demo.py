"""``shadow-twin demo``: the whole twin on one machine, calibrated live, with before/after numbers.

1. Starts, on a private ROS domain kept on this host, ``shadow-twin up
   --mock-hardware`` (sim bridge, a mock robot whose finger damping and friction
   differ from the sim's, the twin server and monitor) and the
   ``calibration_node``, each as its own process (logs in ``<out>/logs``).
2. Runs the *unseen* trajectory (not used by the calibration) through the twin
   and records robot and sim: the sim-real error before calibration.
3. Calibrates live through the node's ``~/calibrate`` (records the calibration
   trajectories, fits, checks the hold-out, installs and reloads the bridge).
4. Runs the calibration trajectories and the unseen trajectory again: the error after.
5. Prints a before/after table, writes ``demo_report.json``, the bags, real-vs-sim
   plots of each recording (``plots/<recording>/``), ``error_before_after.png`` and the
   unseen trajectory's videos before and after (``videos/<unseen>_<before|after>.mp4``).

Errors are the mean over the objective joints (J1-J3 of FF, MF, RF, LF) of the
position MSE between /sim/joint_states and /joint_states over the trajectory plus
its settling time (rad^2), and its square root (rad).

With ``--cell``: the whole cell instead (UR5, hand and MiR250; one goal for the three robots,
the arm swing's effect on the base and a pick-up of the scene's can, ``--scene FILE``, default
``config/scene.yaml``), see ``shadow_twin.cli.demo_cell``.

Exit status: 0 when the demo ran (whatever the numbers), 1 when a step failed, 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from sensor_msgs.msg import JointState

from calibration_node.execution import TrajectoryExecutor
from calibration_node.recorder import BagRecorder
from shadow_twin.calibration.recordings.bag_comparison import compare_bag, plot_bag
from shadow_twin.calibration.jobs.job import RecordingSource, recorded_mse
from shadow_twin.calibration.scoring.metrics import reduction_percent
from shadow_twin.calibration.jobs.plan import holdout_names
from shadow_twin.cli import demo_cell
from shadow_twin.cli.plot import bag_motion
from shadow_twin.cli.processes import ChildProcesses
from shadow_twin.cli.up import READY_REPORT
from shadow_twin.common.errors import GoalRejectedError, ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import write_text_atomic
from shadow_twin.common.paths import config_path
from shadow_twin.control.trajectory import load_waypoint_yaml
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.plots.demo_figures import plot_error_bars
from shadow_twin.ros.calibration_client import SpinningNode, StatusFollower, follow, request_calibration, run_dir_of
from shadow_twin.ros.dds import isolate_domain
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.video import VideoSettings, render_video
from shadow_twin.visual.video_gl import RenderingUnavailable

OBJECTIVE_JOINTS = ['rh_[FMRL]FJ[123]']
SETTLE = 3.0
#: s from sending a goal to its stamped start: the twin previews it (enforce, in mode both) and then
#: dispatches it before that start (the calibration node's start_lead, 1.0 s; 0.3 s was overrun by a
#: preview on a loaded machine, and the controllers refused the parts whose start had passed)
START_LEAD = 1.0
#: Sends of a goal the twin rejects, as in the cell demo and the calibration node's record_attempts.
SEND_ATTEMPTS = demo_cell.SEND_ATTEMPTS
#: The unseen trajectory's videos: small, at a low rate, the trajectory and 1 s after it (docs/benchmarks.md:
#: what they add to the demo); red at 2 mm: the mock's fingers lag the default model's by about a millimetre.
DEMO_VIDEO = VideoSettings(fps=10.0, width=320, height=240, scale=ErrorScale(full_scale=0.002))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='shadow-twin demo', description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', type=Path, default=None,
                        help='output directory (default ./shadow_twin_demo/<date-time>); must not exist')
    parser.add_argument('--budget', type=int, default=60, help='calibration evaluations (default 60)')
    parser.add_argument('--workers', type=int, default=2, help='parallel simulations (default 2)')
    parser.add_argument('--unseen', default='slow_grasp',
                        help='trajectory of config/trajectories/calibration.yaml kept out of the calibration '
                             '(default slow_grasp)')
    parser.add_argument('--domain-id', type=int, default=None,
                        help="ROS_DOMAIN_ID of the demo (default: a random one in 51..101, the top of the range "
                             "whose ports stay below Linux's ephemeral ports); discovery stays on this host")
    parser.add_argument('--timeout', type=float, default=900.0, help='give up after this many s (default 900)')
    parser.add_argument('--cell', action='store_true',
                        help='the whole cell (UR5, hand, MiR250): one goal for all three and the arm swing\'s '
                             'effect on the base, instead of the hand\'s live calibration')
    parser.add_argument('--scene', type=Path, default=None,
                        help='with --cell: the scene YAML (default config/scene.yaml), as up --scene takes it')
    return parser



def live_error(bag: Path) -> dict:
    """Sim-vs-real error of a trajectory recorded with its commanded trajectory:
    {'mse': rad^2, 'rmse': rad, 'per_joint_mse': {...}}."""

    mse = recorded_mse(RecordingSource(bag.name, bag).resolved(), OBJECTIVE_JOINTS, SETTLE)
    mean = float(np.mean(list(mse.values())))
    return {'mse': mean, 'rmse': float(np.sqrt(mean)), 'per_joint_mse': mse}


class DemoClient:
    """The demo's own ROS node: runs and records trajectories through the twin, triggers calibration."""

    def __init__(self) -> None:
        self.ros = SpinningNode('shadow_twin_demo')
        self.node = self.ros.node
        self.runner = TrajectoryExecutor(self.node, '/twin/follow_joint_trajectory', server_timeout=60.0)
        self.recorder = BagRecorder(self.node, {'/joint_states': JointState, '/sim/joint_states': JointState})
        self.follower = StatusFollower(self.node, '/calibration_node')

    def wait_for_twin(self, processes: ChildProcesses, timeout: float) -> None:
        """Until the twin's action server and both joint-state streams are up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            processes.check()
            if processes.ready('twin') and self.runner.client.server_is_ready() and all(
                    self.node.count_publishers(t) > 0 for t in ('/joint_states', '/sim/joint_states')):
                time.sleep(1.0)    # let the first states reach the twin server
                return
            time.sleep(0.2)
        raise ShadowTwinError(f'the twin did not come up within {timeout:g} s (see the logs)')

    def record(self, name: str, trajectory, bag: Path) -> dict:
        """Run ``trajectory`` through the twin, record it into ``bag``; returns its live error."""
        print(f'  running {name} ({trajectory.duration:.1f} s) ...', flush=True)
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                self.runner.record(self.recorder, trajectory, bag, START_LEAD, SETTLE + 0.3)
                break
            except GoalRejectedError as exc:        # nothing moved: send it again
                if attempt == SEND_ATTEMPTS:
                    raise ShadowTwinError(f'{exc}, {SEND_ATTEMPTS} times (see logs/twin.log)') from None
                print(f'  {exc}; nothing moved, sending {name} again (attempt {attempt + 1}/{SEND_ATTEMPTS})',
                      flush=True)
                time.sleep(1.0)
        return live_error(bag)

    def calibrate(self, timeout: float) -> tuple[int, dict]:
        """Trigger the calibration node and follow it; (exit status as calibrate-live, last status)."""
        try:
            answer = request_calibration(self.node, '/calibration_node', 30.0, follower=self.follower)
        except ShadowTwinError as exc:
            raise ShadowTwinError(f'the calibration node did not come up: {exc} '
                                  '(see logs/calibration_node.log)') from None
        if not answer.success:
            raise ShadowTwinError(f'calibration did not start: {answer.message}')
        return follow(self.node, self.follower, run_dir_of(answer), timeout,
                      out=lambda line: print(f'  {line}', flush=True))

    def close(self) -> None:
        self.recorder.destroy()
        self.ros.close()



def run(args) -> int:
    """The demo (see module doc); returns the exit status."""
    started = time.monotonic()
    out = (args.out or Path('shadow_twin_demo') / time.strftime('%Y%m%d-%H%M%S')).resolve()
    if out.exists():
        raise ShadowTwinError(f'--out {out} exists; the demo never writes over earlier results')
    trajectories_file = config_path('trajectories', 'calibration.yaml')
    unseen = load_waypoint_yaml(trajectories_file, args.unseen)
    calibration_names = ['curl_all', 'stagger']
    if args.unseen in calibration_names:
        raise ShadowTwinError(f'--unseen {args.unseen} is one of the calibration trajectories {calibration_names}')
    held = holdout_names(calibration_names, 'auto')
    for sub in ('logs', 'bags', 'plots'):
        (out / sub).mkdir(parents=True, exist_ok=True)
    domain = isolate_domain(args.domain_id)
    print(f'shadow-twin demo: ROS_DOMAIN_ID={domain} (this host only); output in {out}', flush=True)
    processes = ChildProcesses(out / 'logs')
    python = sys.executable
    processes.start('twin', [python, '-m', 'shadow_twin.cli.main', 'up', '--mock-hardware'],
                    ready_line=READY_REPORT)
    processes.start('calibration_node', [
        python, '-m', 'calibration_node.node', '--ros-args', '--params-file',
        str(config_path('calibration_node.yaml')), '-p', f'output_dir:={out / "calibration"}',
        '-p', f'budget:={args.budget}', '-p', f'workers:={args.workers}', '-p', 'auto_resume:=false',
        '-p', f'trajectories:={json.dumps(calibration_names)}'])
    client = None
    try:
        client = DemoClient()
        print('1. starting the twin with mock hardware (finger damping x3, friction loss x0.5) ...', flush=True)
        client.wait_for_twin(processes, 60.0)
        print(f'2. sim-real error before calibration, unseen trajectory {args.unseen}:', flush=True)
        before_unseen = client.record(args.unseen, unseen, out / 'bags' / f'{args.unseen}_before')
        print(f'     mean MSE {before_unseen["mse"]:.3g} rad^2 (RMS {before_unseen["rmse"]:.4f} rad)', flush=True)
        print('3. calibrating live (calibration_node ~/calibrate):', flush=True)
        code, status = client.calibrate(args.timeout - (time.monotonic() - started))
        processes.check()
        if code != 0:
            raise ShadowTwinError(f'the calibration ended {status.get("phase", "without an answer")}: '
                                  f'{status.get("message", "")}')
        run_dir = Path(status['run_dir'])
        print('4. sim-real error after calibration (the bridge runs the calibrated model):', flush=True)
        rows = []
        for name in calibration_names:
            trajectory = load_waypoint_yaml(trajectories_file, name)
            before = live_error(run_dir / 'bags' / name)
            after = client.record(name, trajectory, out / 'bags' / f'{name}_after')
            rows.append(_row(name, 'held out' if name in held else 'fitted', before, after,
                             run_dir / 'bags' / name, out / 'bags' / f'{name}_after'))
        after_unseen = client.record(args.unseen, unseen, out / 'bags' / f'{args.unseen}_after')
        rows.append(_row(args.unseen, 'unseen', before_unseen, after_unseen, out / 'bags' / f'{args.unseen}_before',
                         out / 'bags' / f'{args.unseen}_after'))
    finally:
        if client is not None:
            client.close()
        processes.stop()
    for row in rows:
        for when in ('before', 'after'):
            plot_bag(row[f'{when}_bag'], out / 'plots' / f'{row["trajectory"]}_{when}')
    plot_error_bars(out / 'error_before_after.png', rows)
    videos = unseen_videos(out, rows[-1])
    elapsed = time.monotonic() - started
    report = {'rows': rows, 'calibration_run': str(run_dir), 'calibration_result': json.loads(
        (run_dir / 'result.json').read_text()), 'wall_time_s': elapsed, 'domain_id': domain, 'videos': videos,
        'budget': args.budget, 'error': 'mean over rh_[FMRL]FJ[123] of the position MSE sim vs real over '
        'the trajectory + 3 s (rad^2); rmse = its square root (rad)'}
    write_text_atomic(out / 'demo_report.json', json.dumps(report, indent=2, default=str) + '\n')
    print('\nsim-real error, J1-J3 of FF/MF/RF/LF (mean position MSE, rad^2; RMS, rad):')
    print(f'  {"trajectory":14s} {"role":9s} {"before":>22s} {"after":>22s} {"MSE change":>11s}')
    for r in rows:
        print(f'  {r["trajectory"]:14s} {r["role"]:9s} {r["before"]["mse"]:10.3g} ({r["before"]["rmse"]:.4f} rad) '
              f'{r["after"]["mse"]:10.3g} ({r["after"]["rmse"]:.4f} rad) {-r["reduction_percent_mse"]:+10.1f} %')
    unseen_row = rows[-1]
    print(f'\nunseen trajectory {args.unseen}: error {unseen_row["reduction_percent_mse"]:.1f} % lower (MSE), '
          f'{unseen_row["reduction_percent_rmse"]:.1f} % lower (RMS)')
    print(f'calibrated model: {report["calibration_result"].get("model")}')
    print(f'report: {out / "demo_report.json"}; plots: {out / "plots"}, {out / "error_before_after.png"}'
          + (f'; videos: {", ".join(str(out / v) for v in videos)}' if videos else ''))
    print(f'demo finished in {elapsed:.0f} s')
    return ExitCode.OK


def unseen_videos(out: Path, row: dict) -> list[str]:
    """``videos/<trajectory>_before.mp4`` and ``_after.mp4`` of ``row``'s bags: the robot's motion as a ghost
    against the live sim's, both as recorded (:data:`DEMO_VIDEO`), from the trajectory's stamped start to 1 s
    after its end. Returns the files written (relative to ``out``); none, with one line, where nothing renders."""
    written, model = [], TwinModel().model
    for when in ('before', 'after'):
        bag = Path(row[f'{when}_bag'])
        source = RecordingSource(bag.name, bag).resolved()
        cmp = compare_bag(bag, moving_only=False)
        motion = bag_motion(cmp)
        start = min(max(source.start - cmp.start, motion.start), motion.end - 1.0 / DEMO_VIDEO.fps)
        settings = replace(DEMO_VIDEO, start=start, seconds=source.trajectory.duration + 1.0,
                           title=f'{row["trajectory"]}: {when} calibration')
        path = out / 'videos' / f'{row["trajectory"]}_{when}.mp4'
        try:
            render_video(path, model, motion, settings)
        except RenderingUnavailable as exc:
            print(f'  no videos of {row["trajectory"]}: {exc}', flush=True)
            break
        written.append(str(path.relative_to(out)))
    return written


def _row(name: str, role: str, before: dict, after: dict, before_bag: Path, after_bag: Path) -> dict:
    return {'trajectory': name, 'role': role, 'before': before, 'after': after,
            'reduction_percent_mse': reduction_percent(before['mse'], after['mse']),
            'reduction_percent_rmse': reduction_percent(before['rmse'], after['rmse']),
            'before_bag': str(before_bag), 'after_bag': str(after_bag)}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``shadow-twin demo``; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.budget < 1 or args.workers < 1:
        print('shadow-twin demo: error: --budget and --workers must be at least 1', file=sys.stderr)
        return ExitCode.BAD_INPUT
    try:
        if args.cell:
            return demo_cell.run(args)
        return run(args)
    except ShadowTwinError as exc:
        print(f'shadow-twin demo: error: {exc}', file=sys.stderr)
        return ExitCode.FAILED
    except KeyboardInterrupt:
        print('shadow-twin demo: interrupted', file=sys.stderr)
        return ExitCode.INTERRUPTED


if __name__ == '__main__':
    sys.exit(main())
