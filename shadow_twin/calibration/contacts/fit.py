"""Contact calibration (issue 37): screen, fit with the default optimiser, check the hold-out runs,
write the calibrated scene.

:func:`calibrate_contacts` takes the protocol's recordings (the mock's, or a real hand's), screens the
search space (which contact parameters the runs can see: the engine's sensitivity screening), fits the
most influential with the calibration engine's default optimiser (``auto``: least squares from the
model's values, a global phase only when that stalls or ends on a bound), and replays every run before and
after (``ContactFit.replays``: the figure of the runs); of the hold-out runs it checks the slip-onset angle
(the tilt at which the object has moved ``onset_mm``) against the recording's, and the residuals. :func:`write_calibrated_scene` installs the values in a copy of the scene file (the
scene's objects carry their contact parameters; the user's file is never overwritten).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import yaml

from shadow_twin.calibration.contacts.evaluator import ContactEvaluator, HandModel
from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.calibration.contacts.tilt import TiltRecord
from shadow_twin.calibration.engine.run import Calibration, CalibrationResult
from shadow_twin.calibration.engine.run_settings import CalibrationSettings
from shadow_twin.calibration.engine.sensitivity import most_influential, screen
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.model.calibratable import ParameterTarget


#: Evaluations of a contact fit: the shipped protocol's fit of three parameters on the mock reached the
#: same values with 45 as with 60 (benchmarks/grasp.py, 29 Nov), in three quarters of the time.
DEFAULT_BUDGET = 45


@dataclass
class ContactFit:
    """What :func:`calibrate_contacts` found.

    Attributes:
        values: {dimension name: fitted value} of the fitted dimensions.
        targets: {target: fitted value}, every target of those dimensions.
        influence: {dimension name: influence index} of the screening (empty without one).
        holdout: {run name: {'recorded', 'before', 'after'}} slip-onset angles, rad (NaN: no onset).
        result: the engine's result (initial and best objectives, m^2; the phase log).
        seconds: wall time of screening, fit and hold-out together, s.
        holdout_rms: {run name: {'before', 'after'}} the hold-out runs' residual RMS, m (the objective's
            residuals): the check of a run whose object does not slip (a grip that holds it).
        replays: {'before', 'after'}: {run name: replayed record} of every run with a recording (fitted and held
            out), with the model as given and as fitted (what the figure of the runs draws).
    """

    values: dict[str, float]
    targets: dict[ParameterTarget, float]
    influence: dict[str, float] = field(default_factory=dict)
    holdout: dict[str, dict[str, float]] = field(default_factory=dict)
    result: CalibrationResult | None = None
    seconds: float = 0.0
    holdout_rms: dict[str, dict[str, float]] = field(default_factory=dict)
    replays: dict[str, dict[str, TiltRecord]] = field(default_factory=dict)

    def holdout_errors(self, which: str) -> dict[str, float]:
        """{run: |sim - recorded| onset angle, rad} ``before`` or ``after`` the fit, of the hold-out runs whose
        recording has an onset (the object slipped)."""
        return {name: abs(angles[which] - angles['recorded']) for name, angles in self.holdout.items()
                if np.isfinite(angles['recorded'])}

    def holdout_worse(self) -> list[str]:
        """The hold-out runs the fit made worse: a slip's onset error grew (an onset lost counts), or, for a run
        without a recorded slip, the residual RMS grew."""
        before, after = self.holdout_errors('before'), self.holdout_errors('after')
        worse = [name for name in after if not after[name] <= before[name]]
        return worse + [name for name, rms in self.holdout_rms.items()
                        if name not in after and not rms['after'] <= rms['before']]


def calibrate_contacts(protocol: ContactProtocol, recordings: Mapping[str, TiltRecord], space: SearchSpace,
                       out_dir: str | Path, settings: CalibrationSettings | None = None, screen_samples: int = 0,
                       keep: int = 0, progress: Callable[[str], None] | None = None,
                       hand: HandModel | None = None) -> ContactFit:
    """Fit ``space`` to ``recordings`` (module doc).

    Args:
        protocol: the runs; its hold-out runs need recordings too (else they are not checked).
        recordings: {run name: record}.
        space: the searched contact parameters (``config/calibration/scene_contacts.yaml``).
        out_dir: the engine's checkpoint goes here (must not hold one).
        settings: the engine's settings (default: the default optimiser, :data:`DEFAULT_BUDGET` evaluations,
            2 workers); without finite-difference steps of their own, the protocol's (``diff_step``).
        screen_samples: parameter sets drawn for the screening (0: none, fit every dimension).
        keep: the dimensions kept after a screening, most influential first (0: all).
        progress: called with a line per step.
        hand: the sim's hand and scene (:class:`HandModel`; default: the built-in hand, the protocol's
            scene). Calibrate the hand first and give its result: the fingers' own dynamics move the
            object too.
    Raises:
        ValueError: a fitted run without a recording. ConfigError: ``out_dir`` holds a calibration.
    """
    say = progress or (lambda line: None)
    settings = settings or CalibrationSettings(budget=DEFAULT_BUDGET)
    if settings.diff_step is None and protocol.diff_step:
        settings = dataclasses.replace(settings, diff_step=protocol.diff_step)
    started = time.perf_counter()
    evaluator = ContactEvaluator(protocol, recordings, space, hand)
    try:
        influence = {}
        if screen_samples:
            say(f'screening {len(space.dimensions)} parameters on {screen_samples} samples')
            screened = screen(evaluator, space, screen_samples, workers=settings.workers, seed=settings.seed)
            influence = dict(screened.influence)
            if keep:
                space = space.subset(most_influential(influence, keep, space.names))
                evaluator.space = space
        say(f'fitting {", ".join(space.names)} with {settings.optimizer} ({settings.budget} evaluations)')
        result = Calibration(evaluator, space, settings, out_dir, {'contact_protocol': str(protocol.scene),
                                                                    'runs': [r.name for r in protocol.runs]}).run()
        values = space.named(result.best.x)
        targets = space.named_values(values)
        replays = _replay_all(evaluator, protocol, recordings, targets, settings.workers)
        holdout, rms = _holdout(evaluator, protocol, recordings, replays)
    finally:
        evaluator.close()
    return ContactFit(values, targets, influence, holdout, result, time.perf_counter() - started, rms, replays)


def _replay_all(evaluator: ContactEvaluator, protocol: ContactProtocol, recordings: Mapping[str, TiltRecord],
                targets: Mapping[ParameterTarget, float], workers: int) -> dict[str, dict[str, TiltRecord]]:
    """{'before', 'after'}: {run: record} of every run with a recording, replayed with the model as given and
    fitted (the hold-out runs' recordings added to the evaluator's; the fitted runs' records of both sets are
    the fit's own, kept by the evaluator: only the hold-out runs are simulated here)."""
    runs = [run for run in (*protocol.runs, *protocol.holdout) if run.name in recordings]
    evaluator.add_recordings({run.name: recordings[run.name] for run in protocol.holdout if run.name in recordings})
    before, after = evaluator.replay([{}, dict(targets)], runs, nthread=workers)
    return {which: {run.name: record for run, record in zip(runs, records)}
            for which, records in (('before', before), ('after', after))}


def _holdout(evaluator: ContactEvaluator, protocol: ContactProtocol, recordings: Mapping[str, TiltRecord],
             replays: Mapping[str, Mapping[str, TiltRecord]]) -> tuple[dict, dict]:
    """Of the hold-out runs that have a recording: slip-onset angles (rad: recorded, the model's, fitted) and
    residual RMS (m: the model's, fitted)."""
    window, onsets, rms = protocol.onset_window, {}, {}
    for run in protocol.holdout:
        if run.name not in recordings:
            continue
        b, a = replays['before'][run.name], replays['after'][run.name]
        onsets[run.name] = {'recorded': evaluator.onsets.get(run.name, float('nan')),
                            'before': b.onset(protocol.onset, window), 'after': a.onset(protocol.onset, window)}
        rms[run.name] = {k: float(np.sqrt(np.mean(evaluator.residuals(r) ** 2))) for k, r in (('before', b), ('after', a))}
    return onsets, rms


#: Where each calibrated attribute goes in a scene file's object: (key, index or None).
_SCENE_KEYS = {'friction': ('friction', 'sliding'), 'friction_torsional': ('friction', 'torsional'),
               'solref_timeconst': ('solref', 0), 'solref_dampratio': ('solref', 1), 'solimp_width': ('solimp', 2)}


def write_calibrated_scene(scene_file: str | Path, targets: Mapping[ParameterTarget, float], out: str | Path) -> Path:
    """A copy of ``scene_file`` (YAML) with the fitted contact parameters of its objects, written
    atomically to ``out``; the scene file itself is never overwritten. A geom's friction, torsional
    friction, solref and solimp width and a body's mass go to the object of that name.

    Raises:
        ConfigError: ``out`` is the scene file, a target names no object of the scene, a mass for an
            object given by its density, or an attribute a scene file cannot hold (a centre of mass).
    """
    scene_file, out = Path(scene_file), Path(out)
    if out.exists() and out.resolve() == scene_file.resolve():
        raise ConfigError(f'refusing to overwrite the scene file {scene_file}')
    data = yaml.safe_load(scene_file.read_text(encoding='utf-8')) or {}
    scene = data.get('scene') if isinstance(data, dict) else None
    listed = scene.get('objects') if isinstance(scene, dict) else None
    objects = {obj.get('name'): obj for obj in listed or [] if isinstance(obj, dict)}
    for target, value in targets.items():
        obj = objects.get(target.name)
        if obj is None:
            raise ConfigError(f'{scene_file}: no object named {target.name!r} for {target}')
        if target.kind == 'body' and target.attribute == 'mass':
            if obj.get('mass') is not None:
                obj['mass'] = float(value)
            else:
                raise ConfigError(f'{scene_file}: object {target.name!r} gives a density: set its mass to install {target}')
            continue
        if target.kind != 'geom' or target.attribute not in _SCENE_KEYS:
            raise ConfigError(f'{scene_file}: a scene file cannot hold {target} (install it in the MJCF)')
        key, index = _SCENE_KEYS[target.attribute]
        if key == 'friction':
            friction = obj.get('friction') or {}
            friction = dict(friction) if isinstance(friction, dict) else dict(zip(('sliding', 'torsional', 'rolling'), friction))
            friction[index] = float(value)
            obj['friction'] = friction
        else:
            defaults = {'solref': [0.02, 1.0], 'solimp': [0.9, 0.95, 0.001, 0.5, 2.0]}[key]
            array = list(obj.get(key) or defaults)
            array[index] = float(value)
            obj[key] = array
    header = f'# Calibrated contact parameters (shadow_twin contact calibration) from {scene_file.name}.\n'
    return write_text_atomic(out, header + yaml.safe_dump(data, sort_keys=False))


def onset_degrees(angles: Mapping[str, float]) -> str:
    """'recorded 28.4, before 36.9, after 29.1 deg' for one hold-out run's onset angles (rad); 'no slip recorded'
    when the recording has none (NaN: the object moved less than the onset's distance)."""
    if not np.isfinite(angles.get('recorded', np.nan)):
        return 'no slip recorded'
    return ', '.join(f'{k} {np.degrees(v):.1f}' for k, v in angles.items()) + ' deg'
