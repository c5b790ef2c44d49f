"""Inputs of the offline commands (evaluate, calibrate, sensitivity): their arguments, and the
model, controller, recordings and evaluators loaded and checked from them.

Every input is read and checked before a command creates anything (a ShadowTwinError naming
the problem; the command line prints it on one line and exits 2).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.placement import AlignmentSettings
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.calibration.engine.executor import make_executor
from shadow_twin.calibration.recordings.recording import (TRAJECTORY, bag_topics, read_commanded_trajectory,
                                                          read_joint_states)
from shadow_twin.cli.input_files import load_trajectory
from shadow_twin.simulation.warp_rollout import BACKENDS
from shadow_twin.common.errors import ConfigError, RecordingError, ShadowTwinError
from shadow_twin.common.files import sha256_of
from shadow_twin.common.globs import matching
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import START_TOLERANCE, JointTrajectory
from shadow_twin.identification.recordings import check_positions
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.model.scene import SceneConfig, add_objects

DEFAULT_JOINTS = 'rh_FFJ1,rh_FFJ2,rh_FFJ3,rh_FFJ4'
#: s: the largest --max-delay (the delay fit simulates this much beyond the compared window).
MAX_DELAY = 5.0
log = logging.getLogger('shadow_twin')


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, ``<prog>: error: <message>`` (exit 2),
    like every other input error of the offline commands (argparse prints the usage first)."""

    def error(self, message: str):
        self.exit(2, f'{self.prog}: error: {" ".join(message.split())}\n')


def bounded_int(low: int):
    """argparse type: an integer >= ``low`` (ArgumentTypeError otherwise: one line, exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected an integer, got {text!r}') from None
        if value < low:
            raise argparse.ArgumentTypeError(f'must be at least {low}, got {value}')
        return value
    return parse


#: argparse type: an integer >= 1.
positive_int = bounded_int(1)
#: argparse type: an integer >= 0 (a random seed: numpy takes no negative one).
nonnegative_int = bounded_int(0)


def bounded_float(low: float = 0.0, inclusive: bool = True, high: float = math.inf):
    """argparse type: a finite number >= ``low`` (> ``low`` when not ``inclusive``) and <= ``high``;
    NaN and inf refused (ArgumentTypeError: one line, exit 2)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected a number, got {text!r}') from None
        if not math.isfinite(value) or value < low or (value == low and not inclusive) or value > high:
            upper = f' and <= {high:g}' if math.isfinite(high) else ''
            raise argparse.ArgumentTypeError(f'must be a finite number {">=" if inclusive else ">"} {low:g}{upper}, '
                                             f'got {text!r}')
        return value
    return parse


def add_input_arguments(parser: argparse.ArgumentParser, several: bool = False) -> None:
    """Inputs and alignment options; ``several``: --bag/--trajectory may repeat (pairs, in order)
    with an optional --weight per pair."""
    g = parser.add_argument_group('inputs')
    g.add_argument('--model', type=Path, help='MJCF model (default: built-in Shadow Hand E)')
    g.add_argument('--scene', type=Path, help="scene YAML whose objects every rollout simulates with the model "
                   "(config/scene_hand.yaml; shadow_twin.model.scene); the calibrated MJCF is written without them")
    repeat = {'action': 'append'} if several else {}
    more = '; repeat --bag/--trajectory for several recordings, paired in order' if several else ''
    g.add_argument('--bag', type=Path, required=True, **repeat,
                   help='recording of the real robot: ROS 1 .bag or ROS 2 bag (sqlite3/MCAP)' + more)
    g.add_argument('--topic', help='JointState topic in the bag (default: the only one, or /joint_states)')
    g.add_argument('--trajectory', required=True, metavar='FILE.yaml:NAME', **repeat,
                   help='commanded waypoint trajectory that the recording executes')
    if several:
        g.add_argument('--weight', type=float, action='append', metavar='W',
                       help='weight of each --bag/--trajectory pair in the objective (one per pair, > 0; '
                            'default: equal): the objective is the weighted mean of the recordings\' objectives')
    g.add_argument('--joints', default=DEFAULT_JOINTS, metavar='GLOB,GLOB',
                   help=f'joints in the objective, comma-separated names or fnmatch globs, e.g. \'rh_FF*\' '
                        f'(each must match a joint of every trajectory; default: {DEFAULT_JOINTS})')
    g.add_argument('--gains', type=Path, help='controller gains YAML (default: config/controllers/shadow_hand_e.yaml)')
    g.add_argument('--joint-map', type=Path, help='ROS -> MJCF joint-name map YAML (default: identity)')
    a = parser.add_argument_group('alignment')
    a.add_argument('--settle-time', type=bounded_float(0.0), default=3.0, metavar='S',
                   help='seconds compared after the trajectory ends, >= 0 (default: 3.0)')
    a.add_argument('--onset-threshold', type=bounded_float(0.0, inclusive=False), default=0.1, metavar='RAD/S',
                   help='joint speed marking the motion onset, rad/s, > 0 (default: 0.1)')
    a.add_argument('--max-delay', type=bounded_float(0.0, high=MAX_DELAY), default=0.3, metavar='S',
                   help=f'largest fitted sim-to-real delay, s, 0 to {MAX_DELAY:g} (a twin later than that is not '
                        f'aligned but broken); 0 disables the fit (default: 0.3)')
    a.add_argument('--start-tolerance', type=bounded_float(0.0), default=START_TOLERANCE, metavar='RAD',
                   help='difference between the rest state before the onset and the trajectory\'s first point '
                        'above which the motion is taken to start at t = 0 (the JTC moves to the first point '
                        f'first), rad, >= 0 (default: {START_TOLERANCE})')
    a.add_argument('--matching', choices=('interpolate', 'nearest'), default='interpolate',
                   help='interpolate both streams onto one time base, or nearest-timestamp '
                        'matching of 250 Hz sim samples as in the published study (default: interpolate)')
    a.add_argument('--interpolation', choices=('auto', 'linear', 'cubic', 'quintic'), default='auto',
                   help='trajectory interpolation (default: auto, as the JTC: by the fields present)')
    a.add_argument('--occurrence', type=positive_int, metavar='N',
                   help='which execution of the trajectory in the recording to compare, 1-based '
                        '(default: the first full one)')
    parser.add_argument('-v', '--verbose', action='store_true', help='debug logging')
    parser.add_argument('-q', '--quiet', action='store_true', help='warnings and errors only')


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--space', type=Path, required=True, help='search-space YAML (see config/calibration/)')
    parser.add_argument('--workers', type=positive_int, default=2,
                        help='parallel simulations, at most the CPU cores (more are capped, with a warning; '
                             'default: 2)')
    parser.add_argument('--seed', type=nonnegative_int, default=0, help='random seed, an integer >= 0 (default: 0)')
    parser.add_argument('--cluster', default='', metavar='ADDRESS',
                        help='roll the batches out on a Ray cluster: ray://HEAD:10001 (its client port), '
                             'HEAD:6379, or auto (this machine is a node of it); default: this process\'s '
                             '--workers threads (see docs/calibration.md, "On a cluster (Ray)")')
    parser.add_argument('--backend', choices=BACKENDS, default='cpu',
                        help='where the rollouts run: cpu (mujoco.rollout on --workers threads; the default) or warp '
                             '(MuJoCo Warp, every parameter set of a batch at once: for a GPU; 32-bit floats, see '
                             'docs/calibration.md)')
    parser.add_argument('--device', metavar='DEVICE',
                        help="with --backend warp: Warp's device, e.g. cuda:0 or cpu (default: a GPU where there is one)")
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    parser.add_argument('--out', type=Path, required=True, help='output directory')


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def open_executor(args, evaluator):
    """``with`` block of the executor of ``--cluster`` (local threads, ``capped_workers``, without it),
    with ``evaluator`` already shipped to and checked on every Ray node; closed at the block's end.
    Raises ClusterError (one line): a bad or unreachable address, a node with another MuJoCo version
    or model hash."""
    with make_executor(getattr(args, 'cluster', ''), capped_workers(args, args.command)) as executor:
        executor.prepare(evaluator)
        yield executor


def capped_workers(args, command: str) -> int:
    """``--workers``, capped at the CPU cores (one warning line on stderr when capped)."""
    cores = available_cores()
    if args.workers > cores and not getattr(args, 'workers_warned', False):
        args.workers_warned = True
        print(f'shadow-twin {command}: warning: --workers {args.workers} capped at {cores} (the CPU cores '
              f'this process may use)', file=sys.stderr)
    return min(args.workers, cores)


def alignment_settings(args) -> AlignmentSettings:
    """AlignmentSettings from the alignment options (every command builds them here)."""
    return AlignmentSettings(onset_threshold=args.onset_threshold, max_delay=args.max_delay,
                             settle_time=args.settle_time, matching=args.matching,
                             interpolation=args.interpolation, occurrence=args.occurrence,
                             start_tolerance=getattr(args, 'start_tolerance', START_TOLERANCE))


@dataclass
class Recording:
    """One recording in a command: bag, ``FILE.yaml:NAME`` trajectory, label and its evaluator."""

    bag: Path
    trajectory: str
    name: str
    evaluator: Evaluator
    #: how the trajectory was placed: 'stamp' (the commanded trajectory stamped in the bag) or 'onset'.
    aligned_by: str = 'onset'


@dataclass
class Setup:
    """What a command scores with: model, controller, the fitted recordings' evaluator (one
    Evaluator, or an EvaluatorSet for several), each fitted recording and each hold-out."""

    twin: TwinModel
    controller: SimController
    evaluator: Evaluator | EvaluatorSet
    gains_file: Path
    fit: list[Recording]
    holdout: list[Recording] = field(default_factory=list)
    weights: list[float] | None = None


def recording_pairs(args) -> tuple[list[tuple[Path, str]], list[float] | None]:
    """(bag, trajectory) pairs in order and their weights (None: equal); ConfigError on a count mismatch."""
    bags = args.bag if isinstance(args.bag, list) else [args.bag]
    trajectories = args.trajectory if isinstance(args.trajectory, list) else [args.trajectory]
    if len(bags) != len(trajectories):
        raise ConfigError(f'--bag is given {len(bags)} time(s) and --trajectory {len(trajectories)}: give them '
                          f'in pairs, in order')
    weights = getattr(args, 'weight', None)
    if weights is not None:
        if len(weights) != len(bags):
            raise ConfigError(f'--weight is given {len(weights)} time(s) for {len(bags)} --bag/--trajectory '
                              f'pair(s): give one per pair, or none')
        bad = [w for w in weights if not (w > 0 and w < float('inf'))]
        if bad:
            raise ConfigError(f'--weight must be a finite number > 0, got {bad[0]}')
    return list(zip(bags, trajectories)), weights


def parse_holdout(spec: str) -> tuple[Path, str]:
    """``BAG:FILE.yaml:NAME`` -> (bag, ``FILE.yaml:NAME``), split at the last two ':' (``rsplit``):
    the bag path may contain ':', the trajectory file and name may not. ConfigError if malformed."""
    parts = spec.rsplit(':', 2)
    if len(parts) != 3 or not all(part.strip() for part in parts):
        raise ConfigError(f'--holdout {spec!r}: expected BAG:FILE.yaml:NAME')
    return Path(parts[0]), f'{parts[1]}:{parts[2]}'


def load_setup(args) -> Setup:
    """Load model, controller, recordings and trajectories (fitted pairs and hold-outs); build the
    evaluators. Every input is read and checked here (ShadowTwinError naming the problem).

    A bag that holds the commanded trajectory (one ``trajectory_msgs/JointTrajectory`` topic, as the
    calibration node records) is aligned by its stamp, the trajectory's start, instead of by the
    motion onset (see :func:`stamped_start`)."""
    patterns = [j.strip() for j in args.joints.split(',') if j.strip()]
    if not patterns:
        raise ConfigError('--joints is empty')
    pairs, weights = recording_pairs(args)
    holdouts = [parse_holdout(spec) for spec in getattr(args, 'holdout', None) or []]
    scene = SceneConfig.from_yaml(args.scene) if getattr(args, 'scene', None) else None
    twin = TwinModel(args.model, edit=(lambda spec: add_objects(spec, scene)) if scene is not None else None)
    gains_file = args.gains or config_path('controllers', 'shadow_hand_e.yaml')
    controller = SimController(twin.model, ControllerGains.from_yaml(gains_file),
                               JointNameMap.from_yaml(args.joint_map))
    settings = alignment_settings(args)
    recordings: dict = {}   # one read per bag, shared by its pairs

    def recording(bag: Path, trajectory: str, name: str | None = None) -> Recording:
        key = str(Path(bag).resolve())
        if key not in recordings:
            recordings[key] = read_joint_states(bag, args.topic)
            check_recorded_positions(recordings[key], twin, controller, str(bag))
        commanded = load_trajectory(trajectory)
        joints = match_joints(patterns, commanded)
        start = stamped_start(Path(bag), commanded, settings)
        evaluator = Evaluator(twin, controller, recordings[key], commanded, joints,
                              settings=settings, label=name, trajectory_start=start)
        return Recording(Path(bag), trajectory, name or evaluator.label, evaluator,
                         'onset' if start is None else 'stamp')

    fit = []
    for bag, trajectory in pairs:  # one pair keeps the recording's own label (as before); several get bag:NAME
        name = f'{bag.name}:{trajectory.rsplit(":", 1)[-1]}' if len(pairs) > 1 else None
        if name is not None and name in [r.name for r in fit]:
            name = f'{name} #{len(fit) + 1}'
        fit.append(recording(bag, trajectory, name))
    holdout = []
    for (bag, trajectory), spec in zip(holdouts, args.holdout if holdouts else []):
        name = f'{bag.name}:{trajectory.rsplit(":", 1)[1]}'
        if name in [h.name for h in holdout]:
            name = f'{name} #{len(holdout) + 1}'
        try:
            holdout.append(recording(bag, trajectory, name))
        except ShadowTwinError as exc:
            raise type(exc)(f'--holdout {spec}: {exc}') from None
    evaluator = fit[0].evaluator if len(fit) == 1 else EvaluatorSet([r.evaluator for r in fit], weights)
    backend = getattr(args, 'backend', 'cpu')
    if getattr(args, 'device', None) and backend != 'warp':
        raise ConfigError('--device is for --backend warp')
    if backend != 'cpu':
        for part in [*fit, *holdout]:
            part.evaluator.use_backend(backend, args.device)
    return Setup(twin, controller, evaluator, Path(gains_file), fit, holdout, weights if len(fit) > 1 else None)


def match_joints(patterns: list[str], trajectory: JointTrajectory) -> list[str]:
    """The objective joints: the joints of ``trajectory`` matching ``patterns`` (names or fnmatch
    globs, case-sensitive), in the order the patterns name them. Raises ConfigError naming a pattern
    that matches none of the trajectory's joints."""
    joints: list[str] = []
    for pattern in patterns:
        found = matching(trajectory.joint_names, [pattern])
        if not found:
            raise ConfigError(f'--joints {pattern!r} matches none of the joints of trajectory {trajectory.name!r}: '
                              f'{", ".join(trajectory.joint_names)}')
        joints += [j for j in found if j not in joints]
    return joints


def stamped_start(bag: Path, trajectory: JointTrajectory, settings: AlignmentSettings) -> float | None:
    """The trajectory's start time (s, the joint states' clock) when ``bag`` holds it: one
    ``trajectory_msgs/JointTrajectory`` topic whose first message (stamped with its start, as the
    calibration node records it) has ``trajectory``'s joints and duration. None (align by the motion
    onset) otherwise, or when an ``occurrence`` is chosen; a bag whose trajectory differs is logged.
    Raises RecordingError for a damaged bag."""
    if settings.occurrence is not None:
        return None
    if sum(1 for msgtype in bag_topics(bag).values() if msgtype == TRAJECTORY) != 1:
        return None
    try:
        commanded, start = read_commanded_trajectory(bag)
    except RecordingError as exc:
        log.warning('%s; aligning by the motion onset', exc)
        return None
    if sorted(commanded.joint_names) != sorted(trajectory.joint_names) or not math.isclose(
            commanded.duration, trajectory.duration, abs_tol=1e-3):
        log.warning('%s: the commanded trajectory in the bag (%d joints, %.3f s) is not --trajectory %s '
                    '(%d joints, %.3f s): aligning by the motion onset', bag, len(commanded.joint_names),
                    commanded.duration, trajectory.name, len(trajectory.joint_names), trajectory.duration)
        return None
    log.info('%s: aligned by the commanded trajectory\'s stamp (start %.3f s)', bag, start)
    return start


def check_recorded_positions(recording, twin: TwinModel, controller: SimController, source: str) -> None:
    """Refuse a recording whose simulated joints' positions lie far outside the model's ranges
    (degrees, 1e300): RecordingError naming the joint, sample and time
    (:func:`~shadow_twin.identification.recordings.check_positions`)."""
    joints = [j for j in controller.joint_names if j in recording.joint_names]
    check_positions(twin.model, [controller.joint_map.to_mjcf(j) for j in joints], recording.times,
                    recording.frame['position'][joints].to_numpy(dtype=float), source, names=joints)


def input_files(args, setup: Setup, holdout: bool = True) -> dict[str, Path]:
    """{name: file} of every input (one pair: 'bag', 'trajectory'; several: 'bag:1', 'trajectory:1', ...;
    hold-outs 'holdout_bag:1', ...)."""
    files = {'model': setup.twin.path, **({'scene': args.scene} if getattr(args, 'scene', None) else {})}
    several = len(setup.fit) > 1
    for k, rec in enumerate(setup.fit, 1):
        suffix = f':{k}' if several else ''
        files[f'bag{suffix}'] = rec.bag
        files[f'trajectory{suffix}'] = Path(rec.trajectory.rsplit(':', 1)[0])
    files.update({'space': args.space, 'gains': setup.gains_file})
    for k, rec in enumerate(setup.holdout if holdout else [], 1):
        files[f'holdout_bag:{k}'] = rec.bag
        files[f'holdout_trajectory:{k}'] = Path(rec.trajectory.rsplit(':', 1)[0])
    return files


def fingerprints(files: dict[str, Path]) -> dict[str, dict[str, str]]:
    return {name: {'path': str(Path(p).resolve()), 'sha256': sha256_of(p)} for name, p in files.items()}


def progress_bar(args, total: int, desc: str, unit: str):
    """(tqdm bar on stderr or None, callback(done, total[, best]))."""
    bar = None if args.no_progress else tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)

    def progress(done, _total, best=None):
        if bar is not None:
            bar.update(done - bar.n)
            if best is not None:
                bar.set_postfix(best=f'{best:.5f}')
    return bar, progress
