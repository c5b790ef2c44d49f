"""Calibrate the cell (UR5 arm and MiR250 base) from the recordings of its protocol (ROS-free).

The core of the calibration node's cell calibration (live: the bags it has just recorded
running :mod:`~shadow_twin.calibration.jobs.protocol`'s runs through the twin; offline: bags given
with ``bag:=``, or ``shadow-twin calibrate --protocol``). A job, for each group (the two at once: they
share nothing, each fit starts from the model as given on its own runs; issue 39):

1. **screens** the group's search space (the study's influence index over
   ``screening_samples`` random parameter sets, :mod:`~shadow_twin.calibration.engine.sensitivity`) on
   its identification runs, and keeps the ``screened_keep`` most influential parameters;
2. **fits** them (``*_budget`` rollouts, :data:`GROUP_OPTIMIZERS`) on the identification runs together
   (:class:`~shadow_twin.calibration.scoring.evaluation.EvaluatorSet`):
   the arm on its arm-identification runs (the arm joints' position MSE, rad^2), the base on
   IN1, IN2, CN1 (the study's path objective, :class:`BaseEvaluator`, m^2); then each fitted
   parameter the identification runs do not need changed goes back to the model's value
   (:data:`KEEP_MODEL_TOLERANCE`);
3. **validates**: every run is simulated with the model as given and as calibrated (both
   groups' values), and scored: RMSE of x, y (m) and yaw (rad) of the path relative to its
   start, RMSE of the arm joints (rad) over the run, and the run's objective (the path
   objective for base runs, m^2; the arm MSE for arm runs, rad^2);
4. **decides**: the calibration is installed only if both fits lowered their objective and
   no validation run got worse, on its path or on its arm
   (:func:`~shadow_twin.calibration.jobs.cell_result.cell_install_decision`);
5. writes ``report.json``, ``parameters.yaml``, the calibrated MJCF, a PNG per run
   (``runs/<RUN>.png``: real and simulated path in the plane, arm joints over time), each
   group's ``sensitivity_<group>/tornado.png`` and checkpoint, and ``result.json`` (last: it
   marks the run finished). A killed job resumes from the checkpoints of its fits.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import yaml

from shadow_twin.calibration.recordings import alignment
from shadow_twin.calibration.scoring.base_evaluation import BaseEvaluator, BaseObjectiveSettings
from shadow_twin.calibration.recordings.base_recording import read_base_recording
from shadow_twin.calibration.jobs.cell_result import CellJobResult, GroupFit, cell_install_decision, run_metrics
from shadow_twin.calibration.scoring import reduced
from shadow_twin.calibration.jobs.cell_search import group_search_model
from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.placement import AlignmentSettings
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.calibration.jobs.job import write_result
from shadow_twin.calibration.jobs.protocol import (ARM_IDENTIFICATION, IDENTIFICATION, VALIDATION, CellProtocol,
                                                   ProtocolRun)
from shadow_twin.calibration.recordings.recording import (JointStateRecording, read_commanded_trajectory,
                                                          read_joint_states)
from shadow_twin.calibration.engine.executor import make_executor
from shadow_twin.calibration.engine.report import parameters_document
from shadow_twin.calibration.engine.run import CHECKPOINT, Calibration, CalibrationSettings
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.calibration.engine.sensitivity import screen, write_sensitivity
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.files import sha256_of, write_text_atomic
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.calibratable import ParameterTarget
from shadow_twin.model.mjcf import TwinModel, write_calibrated_mjcf
from shadow_twin.plots.cell_runs import RunPlot, plot_run

log = logging.getLogger(__name__)
REPORT = 'report.json'
PARAMETERS = 'parameters.yaml'
GROUPS = ('arm', 'base')
#: The optimiser of each group's fit (``CalibrationSettings.optimizer``). The arm: Bayesian
#: optimisation. The base: least squares on the path residuals from the model's values. Measured on
#: five live benchmark recordings (benchmarks/calibrate_cell.py, base command latency 0.1 s; the
#: mock MiR250's wheel friction 0.3 and rotor inertia 0.291 kg m^2; 4 screened parameters; the model as
#: given scored 0.0149-0.0430 m^2): 'lsq' with 40 rollouts found friction 0.301-0.305 and inertia
#: 0.290-0.298 on all five (4e-6 to 1.1e-4 m^2); 'bo+lsq' with 80 (40 global) missed on two (a
#: local minimum at 0.0036 m^2; nothing better than the model); 'bo' with 40 found nothing better
#: on the first. The model as given lies in the valley that leads to the floor's values; a global
#: phase samples the rugged slopes where the wheels start to slip, and least squares from its best
#: point stays there.
GROUP_OPTIMIZERS = {'arm': 'bo', 'base': 'lsq'}
#: After a fit, each fitted parameter (the least influential first) goes back to the model's value
#: when that scores the identification runs within this fraction of the fit's best (relative): the
#: data do not ask for the change, and a parameter the identification runs hardly see can still move
#: a validation run. Measured on a live benchmark recording: the fit left the casters' pivot damping
#: at 0.25 N m s/rad (the model's: 0.01) with the path objective at 4.3e-4 m^2; back at 0.01 it
#: scored 3.5e-4, and validation run CN2 went from 156 % worse to 99.7 % better.
KEEP_MODEL_TOLERANCE = 0.05
#: Stages reported to ``progress``.
STAGES = ('arm screening', 'arm fit', 'base screening', 'base fit', 'validation')


@dataclass
class CellTopics:
    """Topics of a cell recording.

    Attributes:
        cmd_vel: ``geometry_msgs/TwistStamped`` (or Twist) commands of the real base.
        odom: ``nav_msgs/Odometry`` of the real base (None: the bag's only one).
        pose: motion-capture ``geometry_msgs/PoseStamped`` of the base; takes precedence
            over odometry (None: the bag's only one, if any).
        arm: ``sensor_msgs/JointState`` of the real arm.
    """

    cmd_vel: str = '/cmd_vel'
    odom: str | None = '/odom'
    pose: str | None = None
    arm: str = '/joint_states'


@dataclass
class CellJobSpec:
    """Inputs of a cell calibration.

    Attributes:
        protocol: the protocol the bags were recorded with.
        model_path: the cell MJCF the sim runs (the calibration starts from it).
        gains_file: its simulated controller gains YAML.
        bags: {run name: bag}, one per run of the protocol.
        topics: topics of the bags.
        seed: random seed of the screenings and fits.
        workers: simulations in parallel (threads).
        frame_file: floor frame (``shadow-twin frame-calibration``) of a motion-capture pose topic.
        cluster: where the screenings' and fits' rollout batches run ('' = this process's threads;
            a Ray cluster: :mod:`shadow_twin.calibration.engine.executor`).
        base_objective: how base runs are replayed and compared.
        reduce: 'auto' screens and fits each group on the model with the parts its runs need not move frozen,
            where that is measured within tolerance (:func:`~shadow_twin.calibration.jobs.cell_search.group_search_model`); 'exact' and
            'off' on the whole model (freezing a part is never exact).
    """

    protocol: CellProtocol
    model_path: Path
    gains_file: Path
    bags: dict
    topics: CellTopics = field(default_factory=CellTopics)
    seed: int = 0
    workers: int = 2
    frame_file: Path | None = None
    cluster: str = ''
    base_objective: BaseObjectiveSettings = field(default_factory=BaseObjectiveSettings)
    reduce: str = reduced.DEFAULT_MODE


class CellCalibrationJob:
    """Prepare and run one cell calibration into ``run_dir`` (see module doc).

    Args:
        spec: the inputs.
        run_dir: the run directory (created; the fits' checkpoints are resumed when present).
    Raises:
        ConfigError: a protocol run without a bag, or a bag of no run.
        RecordingError: a bag without the topics a run needs (e.g. a base run without odometry
            or pose topic), a path that never moves, streams that do not cover the run.
        ModelError / SearchSpaceError / TrajectoryError: a bad model, space or trajectory.
        All from construction, before anything is simulated.
    """

    def __init__(self, spec: CellJobSpec, run_dir: str | Path) -> None:
        self.spec, self.run_dir = spec, Path(run_dir)
        protocol = spec.protocol
        names = [r.name for r in protocol.runs]
        missing = [n for n in names if n not in spec.bags]
        extra = [n for n in spec.bags if n not in names]
        if missing or extra:
            raise ConfigError(f'protocol runs without a bag: {missing}; bags of no protocol run: {extra}'
                              if missing else f'bags of no protocol run: {extra} (runs: {names})')
        self.twin = TwinModel(spec.model_path)
        self.controller = SimController(self.twin.model, ControllerGains.from_yaml(spec.gains_file))
        self.spaces = {'arm': SearchSpace.from_yaml(protocol.arm_space, self.twin),
                       'base': SearchSpace.from_yaml(protocol.base_space, self.twin)}
        self.arm_joints = [j for j in protocol.rest_pose if j in self.controller.joint_names]
        if len(self.arm_joints) != len(protocol.rest_pose):
            raise ConfigError(f'the model {spec.model_path} does not drive the arm joints '
                              f'{[j for j in protocol.rest_pose if j not in self.arm_joints]}')
        frame = FrameCalibration.read(spec.frame_file) if spec.frame_file else None
        #: How base runs are replayed: the spec's settings, with the protocol's lead-in.
        self.base_objective = spec.base_objective
        if spec.base_objective.lead_in is None and protocol.lead_in is not None:
            self.base_objective = replace(spec.base_objective, lead_in=protocol.lead_in_commands())
        self.evaluators: dict[str, Evaluator | BaseEvaluator] = {}
        for run in protocol.runs:
            try:
                self.evaluators[run.name] = self._evaluator(run, Path(spec.bags[run.name]), frame)
            except RecordingError as exc:
                raise RecordingError(f'run {run.name} ({spec.bags[run.name]}): {exc}') from None

    # -- inputs --------------------------------------------------------------------------------
    def _evaluator(self, run: ProtocolRun, bag: Path, frame: FrameCalibration | None):
        topics = self.spec.topics
        arm: JointStateRecording = read_joint_states(bag, topics.arm)
        trajectory, start = read_commanded_trajectory(bag)
        if run.role == ARM_IDENTIFICATION:
            settings = AlignmentSettings(settle_time=1.0, stamped_max_delay=0.0)
            return Evaluator(self.twin, self.controller, arm, trajectory, self.arm_joints, settings=settings,
                             trajectory_start=start, label=run.name)
        recording = read_base_recording(bag, topics.cmd_vel, topics.odom if not topics.pose else None,
                                        topics.pose, frame)
        first = float(recording.command_times[0])       # the replay starts here; the arm at its stamp
        at_start = alignment.resample(arm.times, arm.values(self.arm_joints),
                                      [min(max(first, arm.times[0]), arm.times[-1])])[0]
        return BaseEvaluator(self.twin, self.controller, recording, self.base_objective,
                             trajectory if run.arm.moves else None, start,
                             dict(zip(self.arm_joints, at_start)), arm_recording=arm, arm_joints=self.arm_joints)

    def _inputs(self) -> dict:
        files = {'model': self.twin.path, 'gains': self.spec.gains_file, 'protocol': self.spec.protocol.source,
                 'arm_space': self.spec.protocol.arm_space, 'base_space': self.spec.protocol.base_space}
        files.update({f'bag:{name}': bag for name, bag in self.spec.bags.items()})
        return {name: {'path': str(Path(p).resolve()), 'sha256': sha256_of(p)}
                for name, p in files.items() if p and Path(p).is_file()}

    def runs_of(self, *roles: str) -> list[str]:
        return [r.name for r in self.spec.protocol.runs if r.role in roles]

    # -- the job -------------------------------------------------------------------------------
    def run(self, progress: Callable[[str, int, int, float], None] | None = None) -> CellJobResult:
        """Screen, fit, validate, decide, write the outputs and ``result.json``; returns the result.

        ``progress(stage, done, total, best)`` after every batch (stage: one of :data:`STAGES`;
        ``best``: the lowest objective so far, NaN while screening).
        """
        started = time.perf_counter()
        inputs = self._inputs()
        with make_executor(self.spec.cluster, self.spec.workers) as executor:    # one cluster join for both groups
            # the two groups share nothing (each fit starts from the model as given, on its own runs): fitted at
            # once, the arm's optimiser (Python-bound) overlaps the base's rollouts (which release the GIL);
            # each its own settings and seed, so the values are those of one group after the other
            # (the base in a daemon thread, the arm in this one: Ctrl-C and SIGTERM still end the job at once)
            base: dict = {}

            def fit_base() -> None:
                try:
                    base['fit'] = self._group('base', self.runs_of(IDENTIFICATION), executor, progress, inputs)
                except BaseException as exc:        # re-raised in this thread
                    base['error'] = exc
            thread = threading.Thread(target=fit_base, name='cell_base_group', daemon=True)
            thread.start()
            arm = self._group('arm', self.runs_of(ARM_IDENTIFICATION), executor, progress, inputs)
            thread.join()
            if 'error' in base:
                raise base['error']
            groups = {'arm': arm, 'base': base['fit']}
        calibrated = {**groups['arm'].values, **groups['base'].values}
        runs, plots = self._compare(calibrated, progress)
        validation_runs = self.runs_of(VALIDATION)
        accept, reason = cell_install_decision(groups, runs, validation_runs)
        mjcf_values, _ = self.controller.split_values(calibrated, self.twin.model)
        model = write_calibrated_mjcf(self.twin, mjcf_values,
                                      self.run_dir / f'{Path(self.twin.path).stem}_calibrated.xml')
        parameters = write_text_atomic(self.run_dir / PARAMETERS, yaml.safe_dump(
            {name: parameters_document(self.spaces[name].subset(fit.fitted),
                                       [fit.named[p] for p in fit.fitted], self.controller, self.twin.model)
             if fit.fitted else {} for name, fit in groups.items()}, sort_keys=False))
        result = CellJobResult(accept, reason, runs,
                               {n: {'before': runs[n]['before']['objective'], 'after': runs[n]['after']['objective']}
                                for n in validation_runs}, groups, model, parameters)
        report = {'protocol': self.spec.protocol.source, 'inputs': inputs, **result.to_dict(),
                  'roles': {r.name: r.role for r in self.spec.protocol.runs},
                  'outputs': {'plots': plots, 'calibrated_model': model.name, 'parameters': PARAMETERS,
                              'tornado': {g: f'sensitivity_{g}/tornado.png' for g in GROUPS}},
                  'wall_time_s': time.perf_counter() - started}
        write_text_atomic(self.run_dir / REPORT, json.dumps(report, indent=2) + '\n')
        self.write_result(result.to_dict())
        log.info('cell calibration %s: %s', 'accepted' if accept else 'refused', reason)
        return result

    def _group(self, group: str, run_names: list[str], executor, progress, inputs: dict) -> GroupFit:
        """Screen and fit one group on ``run_names``, its rollout batches through ``executor``."""
        protocol, space = self.spec.protocol, self.spaces[group]
        if not run_names:
            return GroupFit({}, list(space.names), [], {}, {}, float('nan'), float('nan'), 0)
        evaluator = EvaluatorSet([self.evaluators[n] for n in run_names])
        if self.spec.reduce == 'auto':          # freezing a part is never exact: not under 'exact'
            evaluator = group_search_model(self, group, run_names, evaluator)
        executor.prepare(evaluator)                 # shipped once, checked on every node, before any rollout
        influence, ranking, fitted = {}, list(space.names), list(space.names)
        if protocol.screening_samples:
            screened = screen(evaluator, space, protocol.screening_samples, self.spec.workers, self.spec.seed,
                              progress=lambda done, total: progress and progress(f'{group} screening', done, total,
                                                                                 float('nan')), executor=executor)
            influence, ranking = screened.influence, screened.ranking()
            fitted = screened.most_influential(min(protocol.screened_keep, len(space.names)))
            write_sensitivity(self.run_dir / f'sensitivity_{group}', screened, {'runs': run_names},
                              title=f'{group}: influence on the objective of {", ".join(run_names)}')
            log.info('%s screening (%d samples): %s; fitting %s', group, protocol.screening_samples,
                     ', '.join(f'{n} {influence[n]:+.2f}' for n in ranking), fitted)
        subspace = space.subset(fitted)
        budget = protocol.arm_budget if group == 'arm' else protocol.base_budget
        settings = CalibrationSettings(optimizer=GROUP_OPTIMIZERS[group], budget=budget, workers=self.spec.workers,
                                       seed=self.spec.seed, acq_func='EI', log_objective=True)
        out = self.run_dir / f'fit_{group}'
        calibration = Calibration(evaluator, subspace, settings, out,
                                  {'inputs': {k: v['sha256'] for k, v in inputs.items()}, 'runs': run_names},
                                  resume=(out / CHECKPOINT).exists(), executor=executor)
        result = calibration.run(lambda done, total, best: progress and progress(f'{group} fit', done, total, best))
        improved = result.best.objective < result.initial.objective
        log.info('%s fit: %.6g -> %.6g (%d rollouts)%s', group, result.initial.objective, result.best.objective,
                 len(result.evaluations), '' if improved else '; nothing better found, the model is kept')
        if not improved:
            return GroupFit(influence, ranking, [], {}, {}, result.initial.objective, result.initial.objective,
                            len(result.evaluations))
        named = subspace.named(result.best.x)
        named, best, kept, tried = self._keep_model_values(
            evaluator, subspace, named, result.best.objective, result.initial.objective,
            [n for n in ranking if n in named][::-1])
        changed = [n for n in fitted if n in named]
        return GroupFit(influence, ranking, changed, subspace.named_values(named), named, result.initial.objective,
                        best, len(result.evaluations) + tried, kept)

    def _keep_model_values(self, evaluator, subspace, named: dict, best: float, initial: float,
                           order: list) -> tuple[dict, float, list, int]:
        """Put fitted parameters back to the model's value, one at a time in ``order``, while the
        identification objective stays within :data:`KEEP_MODEL_TOLERANCE` of ``best`` (the fit's)
        and below ``initial`` (the model's). Returns ({parameter: value} still changed, its
        objective, [parameters put back], rollouts)."""
        limit, kept, tried = min(best * (1.0 + KEEP_MODEL_TOLERANCE), initial), [], 0
        for name in order:
            if len(named) == 1:
                break                                   # the fit changes at least one parameter
            trial = {n: v for n, v in named.items() if n != name}
            score = evaluator.evaluate([subspace.named_values(trial)], self.spec.workers)[0].objective
            tried += 1
            if score <= limit:
                named, best = trial, score
                kept.append(name)
                log.info('%s kept at the model\'s value: the fit scores %.6g without it (limit %.6g)',
                         name, score, limit)
        return named, best, kept, tried

    def _compare(self, calibrated: Mapping[ParameterTarget, float], progress) -> tuple[dict, dict]:
        """Score every run before and after; write its PNG. Returns ({run: metrics}, {run: png})."""
        runs, plots = {}, {}
        protocol = self.spec.protocol
        for k, run in enumerate(protocol.runs):
            evaluator = self.evaluators[run.name]
            if isinstance(evaluator, BaseEvaluator):
                paths, arms = evaluator.simulate_with_arm([{}, dict(calibrated)], self.spec.workers)
                metrics = [run_metrics(evaluator.path_rmse(p), evaluator.arm_mse(a) if run.arm.moves else None,
                                       evaluator.score_path(p).objective) for p, a in zip(paths, arms)]
                plot = RunPlot(run.name, run.role, run.description, evaluator.times, evaluator.real, paths,
                               evaluator.arm_times, evaluator.arm_joints, evaluator.arm_real, arms)
            else:
                scores = evaluator.evaluate([{}, dict(calibrated)], self.spec.workers, keep_positions=True)
                metrics = [run_metrics(None, s.per_joint_mse, s.objective) for s in scores]
                plot = RunPlot(run.name, run.role, run.description, arm_times=evaluator.time_base,
                               arm_joints=evaluator.joints, arm_real=evaluator.real,
                               arm_sim=np.stack([s.positions for s in scores]))
            runs[run.name] = {'role': run.role, 'before': metrics[0], 'after': metrics[1]}
            plots[run.name] = f'runs/{run.name}.png'
            plot_run(self.run_dir / plots[run.name], plot)
            if progress:
                progress('validation', k + 1, len(protocol.runs), float('nan'))
        return runs, plots

    def write_result(self, document: dict) -> Path:
        """Write (or rewrite) ``result.json`` atomically; returns its path."""
        return write_result(self.run_dir, document)
