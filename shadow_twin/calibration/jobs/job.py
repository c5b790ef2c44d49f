"""A calibration job over recorded bags: fit on some, check on the others, decide whether to install.

This is the ROS-free core of the ``calibration_node`` (online: bags it has just
recorded; offline: bags given with ``bag:=``). A job:

1. builds one :class:`~shadow_twin.calibration.scoring.evaluation.Evaluator` per recording (the
   commanded trajectory and its start time come from the bag when the calibration
   node recorded it, else from the job's ``trajectory``; then the start is found
   from the motion onset);
2. runs a checkpointed :class:`~shadow_twin.calibration.engine.run.Calibration` on the *fit*
   recordings together (:class:`~shadow_twin.calibration.scoring.evaluation.EvaluatorSet`), resuming
   from the checkpoint in the run directory when there is one;
3. writes the outputs of the foundation (``report.json``, ``parameters.yaml``,
   ``history.csv``, plots, ``<model>_calibrated.xml``) into the run directory;
4. scores the *hold-out* recordings with the model as given and as calibrated,
   and decides: install only if the calibration lowered the fit objective and
   did not raise the hold-out error (:func:`install_decision`);
5. writes ``result.json`` (atomically, last: it marks the run finished).

:func:`publish_model` then copies an accepted calibrated model into the models
directory under a new versioned name (never over an earlier file).

Run directory::

    <run>/plan.yaml           what to do (written by the node; see calibration_node)
    <run>/bags/<name>/        the recordings (MCAP)
    <run>/checkpoint.jsonl    the optimiser's checkpoint
    <run>/report.json ...     the foundation's outputs
    <run>/result.json         the decision; present = finished
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import yaml

from shadow_twin.calibration.scoring import metrics
from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.placement import AlignmentSettings
from shadow_twin.calibration.scoring.reduced import DEFAULT_MODE as DEFAULT_REDUCE, SearchModel, search_model
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.calibration.scoring.metrics import reduction_percent
from shadow_twin.calibration.recordings.recording import (JOINT_STATE, JointStateRecording, bag_topics,
                                                          read_commanded_trajectory, read_joint_states)
from shadow_twin.calibration.engine.executor import make_executor
from shadow_twin.calibration.engine.report import write_outputs
from shadow_twin.calibration.engine.run import CHECKPOINT, Calibration, CalibrationSettings
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.files import sha256_of, versioned_path, write_bytes_atomic, write_text_atomic
from shadow_twin.common.globs import matching
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import TwinModel

log = logging.getLogger(__name__)
RESULT = 'result.json'
#: Relative margin below which a hold-out change counts as "not worse" (numerical noise), -.
HOLDOUT_TOLERANCE = 1e-9


@dataclass
class RecordingSource:
    """One recording of the real robot (and optionally the sim) following one trajectory.

    Attributes:
        name: label in reports.
        bag: ROS 1 ``.bag`` or ROS 2 bag.
        trajectory: the commanded trajectory; None: read from the bag's
            ``trajectory_msgs/JointTrajectory`` topic.
        start: trajectory start on the recording's clock, s; None: the bag's
            trajectory stamp, or the detected motion onset.
        real_topic: JointState topic of the robot.
        sim_topic: JointState topic of the live sim, if recorded (for the live error).
    """

    name: str
    bag: Path
    trajectory: JointTrajectory | None = None
    start: float | None = None
    real_topic: str = '/joint_states'
    sim_topic: str | None = '/sim/joint_states'

    def resolved(self) -> 'RecordingSource':
        """A copy with ``trajectory`` (and ``start`` where the bag has it) filled in.

        Raises RecordingError: no trajectory given and none in the bag.
        """
        if self.trajectory is not None:
            return self
        trajectory, start = read_commanded_trajectory(self.bag)
        trajectory.name = self.name
        return RecordingSource(self.name, Path(self.bag), trajectory, self.start if self.start is not None else start,
                               self.real_topic, self.sim_topic)


@dataclass
class JobSpec:
    """Inputs of a calibration job.

    Attributes:
        model_path: MJCF the sim runs now (the calibration starts from it).
        gains_file: simulated controller gains YAML.
        space_file: search-space YAML.
        objective_joints: globs on ROS joint names; the objective averages the MSE of the
            matching joints of each trajectory (rad^2).
        fit: recordings the parameters are fitted to (at least one).
        holdout: recordings only scored, before and after (may be empty).
        settings: optimiser settings.
        alignment: alignment settings.
        joint_map_file: ROS -> MJCF joint-name map YAML (None: identity).
        cluster: where the rollout batches run: '' (this process's threads), ``auto``,
            ``ray://HOST:PORT`` or ``HOST:PORT`` (a Ray cluster; :mod:`shadow_twin.calibration.engine.executor`).
        reduce: what the search simulates (:mod:`~shadow_twin.calibration.scoring.reduced`): auto, exact or off.
    """

    model_path: Path
    gains_file: Path
    space_file: Path
    objective_joints: list[str]
    fit: list[RecordingSource]
    holdout: list[RecordingSource] = field(default_factory=list)
    settings: CalibrationSettings = field(default_factory=CalibrationSettings)
    alignment: AlignmentSettings = field(default_factory=AlignmentSettings)
    joint_map_file: Path | None = None
    cluster: str = ''
    reduce: str = DEFAULT_REDUCE


@dataclass
class JobResult:
    """Outcome of a job (objectives in rad^2).

    Attributes:
        report: the foundation's report.json content.
        fit_before, fit_after: mean objective over the fit recordings, model as given / calibrated.
        holdout: {name: {'before': rad^2, 'after': rad^2}} per hold-out recording.
        accept: whether the calibrated model may be installed.
        reason: why (one line).
        calibrated_model: the calibrated MJCF in the run directory.
        live: {name: live sim-vs-real MSE over the objective joints as recorded} (rad^2), where
            the bag holds the sim stream too.
    """

    report: dict
    fit_before: float
    fit_after: float
    holdout: dict[str, dict[str, float]]
    accept: bool
    reason: str
    calibrated_model: Path
    live: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {'fit': {'before': self.fit_before, 'after': self.fit_after,
                        'reduction_percent': reduction_percent(self.fit_before, self.fit_after)},
                'holdout': {name: {**v, 'reduction_percent': reduction_percent(v['before'], v['after'])}
                            for name, v in self.holdout.items()},
                'accept': self.accept, 'reason': self.reason,
                'calibrated_model': str(self.calibrated_model), 'live_mse_before': self.live}


def install_decision(fit_before: float, fit_after: float,
                     holdout: dict[str, dict[str, float]]) -> tuple[bool, str]:
    """Whether to install a calibration, and why.

    Refused when the fit objective did not fall, or when the mean hold-out error
    after calibration is higher than before (beyond ``HOLDOUT_TOLERANCE``, relative).
    Objectives in rad^2.
    """
    if not fit_after < fit_before:
        return False, f'no better parameters found (fit objective {fit_before:.6g} -> {fit_after:.6g} rad^2)'
    if not holdout:
        return True, (f'fit objective {fit_before:.6g} -> {fit_after:.6g} rad^2 '
                      f'({reduction_percent(fit_before, fit_after):.1f} % lower); no hold-out recording to check')
    before = sum(v['before'] for v in holdout.values()) / len(holdout)
    after = sum(v['after'] for v in holdout.values()) / len(holdout)
    if after > before * (1 + HOLDOUT_TOLERANCE):
        return False, (f'hold-out error would rise {before:.6g} -> {after:.6g} rad^2 '
                       f'({-reduction_percent(before, after):.1f} % worse): calibration not installed')
    return True, (f'fit objective {fit_before:.6g} -> {fit_after:.6g} rad^2; hold-out {before:.6g} -> '
                  f'{after:.6g} rad^2 ({reduction_percent(before, after):.1f} % lower)')


def objective_joints_of(globs: Sequence[str], trajectory: JointTrajectory) -> list[str]:
    """Joints of ``trajectory`` matching any of ``globs``. Raises ConfigError when none match."""
    joints = matching(trajectory.joint_names, globs)
    if not joints:
        raise ConfigError(f'objective_joints {list(globs)} match none of the joints of trajectory '
                          f'{trajectory.name!r}: {trajectory.joint_names}')
    return joints


def recorded_mse(source: RecordingSource, objective_globs: Sequence[str], settle_time: float,
                 real: JointStateRecording | None = None) -> dict[str, float]:
    """Per-joint MSE (rad^2) between the sim and the robot *as recorded* in ``source``'s bag (the
    live twin's error, no simulation), over the trajectory and ``settle_time`` s after it.

    Args:
        source: a resolved recording (trajectory and start known) whose bag holds ``sim_topic``.
        objective_globs: joints compared (globs on the trajectory's joints).
        settle_time: s compared after the trajectory ends.
        real: the robot stream when already read (else read from the bag).
    Raises:
        RecordingError: no start time, topics missing, or streams not covering the window.
    """
    if source.trajectory is None or source.start is None:
        raise RecordingError(f'{source.name}: the trajectory start is not known')
    real = real if real is not None else read_joint_states(source.bag, source.real_topic)
    sim = read_joint_states(source.bag, source.sim_topic)
    return metrics.recording_mse(real, sim, objective_joints_of(objective_globs, source.trajectory), source.start,
                                 source.start + source.trajectory.duration + settle_time)


class CalibrationJob:
    """Prepare and run one job into ``run_dir`` (see module doc).

    Args:
        spec: the inputs.
        run_dir: run directory (created; its checkpoint is resumed when present).
    Raises:
        ConfigError / RecordingError / ModelError / SearchSpaceError / TrajectoryError:
        bad inputs, named (from construction, before anything is computed).
    """

    def __init__(self, spec: JobSpec, run_dir: str | Path) -> None:
        if not spec.fit:
            raise ConfigError('a calibration needs at least one recording to fit')
        self.spec = spec
        self.run_dir = Path(run_dir)
        self.twin = TwinModel(spec.model_path)
        self.controller = SimController(self.twin.model, ControllerGains.from_yaml(spec.gains_file),
                                        JointNameMap.from_yaml(spec.joint_map_file))
        self.space = SearchSpace.from_yaml(spec.space_file, self.twin)
        self._real: dict[str, JointStateRecording] = {}   # robot streams, by recording name
        self.fit = [s.resolved() for s in spec.fit]
        self.holdout = [s.resolved() for s in spec.holdout]
        self.fit_set = EvaluatorSet([self._evaluator(s) for s in self.fit])
        self._search: SearchModel | None = None
        self.holdout_parts = [self._evaluator(s) for s in self.holdout]

    def _evaluator(self, source: RecordingSource) -> Evaluator:
        recording = self._real[source.name] = read_joint_states(source.bag, source.real_topic)
        joints = objective_joints_of(self.spec.objective_joints, source.trajectory)
        return Evaluator(self.twin, self.controller, recording, source.trajectory, joints,
                         settings=self.spec.alignment, trajectory_start=source.start, label=source.name)

    def _inputs(self) -> dict:
        files = {'model': self.twin.path, 'gains': self.spec.gains_file, 'space': self.spec.space_file}
        files.update({f'bag:{s.name}': s.bag for s in self.fit + self.holdout})
        return {name: {'path': str(Path(p).resolve()), 'sha256': sha256_of(p)} for name, p in files.items()}

    def search(self) -> SearchModel:
        """What the search simulates (:func:`~shadow_twin.calibration.scoring.reduced.search_model` of the fit's
        recordings under ``spec.reduce``; built on the first call)."""
        if self._search is None:
            self._search = search_model(self.fit_set, self.spec.reduce)
        return self._search

    def run(self, progress: Callable[[int, int, float], None] | None = None) -> JobResult:
        """Calibrate, write the outputs and ``result.json``; returns the result.

        ``progress(done, budget, best_objective)`` after each batch (as Calibration.run).
        """
        inputs = self._inputs()
        run_info = {'inputs': {k: v['sha256'] for k, v in inputs.items()},
                    'fit': [s.name for s in self.fit], 'holdout': [s.name for s in self.holdout],
                    'joints': self.fit_set.objective_joints, 'alignment': vars(self.spec.alignment)}
        resume = (self.run_dir / CHECKPOINT).exists()
        if resume:
            log.info('resuming the calibration checkpointed in %s', self.run_dir)
        search = self.search()
        with make_executor(self.spec.cluster, self.spec.settings.workers) as executor:
            executor.prepare(search.evaluator)      # shipped once, checked on every node, before any rollout
            calibration = Calibration(search.evaluator, self.space, self.spec.settings, self.run_dir, run_info,
                                      resume, executor=executor)
            result = calibration.run(progress)
            report = write_outputs(self.run_dir, self.twin, self.controller, self.fit_set, self.space, result, inputs,
                                   executor=executor, search=search)
        best = self.space.values(result.best.x)
        holdout = {}
        for source, part in zip(self.holdout, self.holdout_parts):
            before, after = part.evaluate([{}, best])
            holdout[source.name] = {'before': before.objective, 'after': after.objective}
        fit_before, fit_after = report['objective']['initial'], report['objective']['best']
        accept, reason = install_decision(fit_before, fit_after, holdout)
        job = JobResult(report, fit_before, fit_after, holdout, accept, reason,
                        self.run_dir / report['outputs']['calibrated_model'], self._live_errors())
        self.write_result(job.to_dict())
        log.info('calibration %s: %s', 'accepted' if accept else 'refused', reason)
        return job

    def _live_errors(self) -> dict[str, float]:
        """Live sim-vs-real MSE as recorded (before calibration), where the bag has the sim stream."""
        out = {}
        for source, part in zip(self.fit + self.holdout, self.fit_set.parts + self.holdout_parts):
            if not source.sim_topic or bag_topics(source.bag).get(source.sim_topic) != JOINT_STATE:
                continue
            try:
                aligned = RecordingSource(source.name, source.bag, source.trajectory, part.start, source.real_topic,
                                          source.sim_topic)
                mse = recorded_mse(aligned, self.spec.objective_joints, self.spec.alignment.settle_time,
                                   self._real[source.name])
            except RecordingError as exc:
                log.warning('%s: no live error: %s', source.name, exc)
                continue
            out[source.name] = sum(mse.values()) / len(mse)
        return out

    def write_result(self, document: dict) -> Path:
        """Write (or rewrite) ``result.json`` atomically; returns its path."""
        return write_result(self.run_dir, document)


def write_result(run_dir: str | Path, document: dict) -> Path:
    """Write (or rewrite) ``<run_dir>/result.json`` atomically (it marks a run finished); returns its path."""
    return write_text_atomic(Path(run_dir) / RESULT, json.dumps(document, indent=2) + '\n')


_CALIBRATED_SUFFIX = re.compile(r'(_calibrated.*|_gains_.*)$')


def _base_stem(base_model: Path) -> str:
    return _CALIBRATED_SUFFIX.sub('', Path(base_model).stem) or 'model'


def publish_model(calibrated: Path, models_dir: str | Path, base_model: Path, run_id: str) -> Path:
    """Copy an accepted calibrated MJCF into ``models_dir`` as ``<base>_calibrated_<run_id>.xml``.

    ``<base>`` is the base model's stem without an earlier ``_calibrated...`` suffix; an
    existing file of that name is never replaced (a ``.1``, ``.2``... version is used).
    Written atomically; returns the new path. Raises OSError if it cannot be written.
    """
    target = versioned_path(Path(models_dir) / f'{_base_stem(base_model)}_calibrated_{run_id}.xml')
    return write_bytes_atomic(target, Path(calibrated).read_bytes())


def publish_gains(parameters_file: Path, models_dir: str | Path, base_model: Path, run_id: str) -> Path | None:
    """Write the calibrated controller gains of a run as a gains YAML the bridge loads.

    Controller gains (kp/kd of the simulated effort controller) are not part of the MJCF: when
    the search space calibrated them, ``parameters.yaml`` has a ``controller`` section, written
    here to ``<models_dir>/<base>_gains_<run_id>.yaml`` (versioned, atomic, in the
    ``config/controllers`` format). Returns its path, or None when no gains were calibrated.
    Raises ConfigError if ``parameters_file`` is not a parameters document.
    """
    try:
        doc = yaml.safe_load(Path(parameters_file).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f'{parameters_file}: cannot read the calibrated parameters ({exc})') from None
    if not isinstance(doc, dict) or 'controller' not in doc:
        return None
    target = versioned_path(Path(models_dir) / f'{_base_stem(base_model)}_gains_{run_id}.yaml')
    return write_text_atomic(target, yaml.safe_dump({'controller': doc['controller']}, sort_keys=False))
