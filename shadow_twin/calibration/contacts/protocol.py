"""The contact calibration protocol (issue 37): which runs are recorded, and how.

The hand holds (or just stands by) an object resting on a support, and the arm turns the hand slowly
about the palm's x axis, turning gravity in the hand's frame, until the object slips; each run is one
tilt at a fixed rate (``rate`` deg/s) for ``duration`` s, the fingers open (``grip: false``: the
object slides or tips on its support alone, so the support's friction decides) or closed to the
protocol's ``grip`` targets (the fingertips' friction, the grip's force and the object's weight
decide). A **push** run (``push``: {joint: rad} reached in ``push_s`` s) turns nothing: the fingers open,
those joints push the object across its support (friction times weight, in their efforts). Runs at other
rates are the hold-out (tilts only): their slip-onset angle (the tilt at which the object has moved
``onset_mm`` in the palm's frame, :meth:`~.tilt.TiltRecord.onset`) is compared, sim against the robot, and
their residuals.

YAML (``config/calibration/contact_protocol.yaml``)::

    contact_protocol:
      scene: ../scene_contacts_hand.yaml   # the scene file (relative to this file's folder)
      object: can                 # the free object observed
      palm: rh_palm               # the body whose frame the object's position is read in
      grip: {rh_FFJ3: 1.0, ...}   # joint targets of the closed grip, rad
      close_s: 1.0                # s to close the grip; then settle_s s of holding before the tilt
      settle_s: 8.0
      settle_open_s: 0.5          # s before a run with the fingers open
      sample_s: 0.02              # s between samples (the capture's 50 Hz)
      onset_mm: 10.0              # mm: the slip onset (past the soft contacts' creep) ...
      onset_window_s: 0.2         # ... of the positions averaged over this long (a capture's noise)
      clip_mm: 20.0               # mm: a residual's soft limit (an object that fell is far off either way)
      effort_weight: 0.1          # m per N m: the grip joints' efforts beside the object's position
      effort_change: true         # efforts compared by their change since the tilt began (false: as recorded)
      onset_weight: 1.0           # mm per deg: a slide's onset angle beside its path (0: the path alone)
      diff_step: [0.1, 0.03]      # the fit's finite-difference steps, fractions of each range (optional)
      fit: [can_friction, can_mass]   # what the runs identify: the search space's names fitted by default (optional)
      runs:    [{name: tilt_open, grip: false, rate: 10.0, duration: 5.0, axis: x},
                {name: push_thumb, push: {rh_THJ4: 1.2, rh_THJ5: 0.6}, push_s: 2.5, duration: 3.5}, ...]
      holdout: [{name: tilt_open_slow, grip: false, rate: 6.0, duration: 8.5}, ...]
      live:                       # the runs on the robots (shadow-twin calibrate --contacts --record)
        scene: ../scene_contacts_cell.yaml   # the robots' scene: the same fixture, fixed to the forearm
        arm_start: {shoulder_pan_joint: 0.0, ..., wrist_3_joint: 0.0}   # rad: the forearm upright
        positioning_s: 3.0        # s to reach it
        park: [2.0, 0.0, 0.1]     # m, world: where the object waits while the arm positions (optional)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from shadow_twin.common import config_values as values
from shadow_twin.common.errors import ConfigError

_KEYS = ('scene', 'object', 'palm', 'grip', 'close_s', 'settle_s', 'settle_open_s', 'sample_s', 'onset_mm',
         'onset_window_s', 'clip_mm', 'effort_weight', 'effort_change', 'onset_weight', 'diff_step', 'fit', 'runs',
         'holdout', 'live')
_RUN_KEYS = ('name', 'grip', 'rate', 'duration', 'axis', 'push', 'push_s')
#: The palm-frame axes a run may turn the hand about.
AXES = ('x', '-x', 'y', '-y')


@dataclass(frozen=True)
class TiltRun:
    """One run: ``name``; ``grip`` (the fingers closed to the protocol's grip, else open at their
    initial pose); tilt ``rate`` (rad/s) for ``duration`` (s) about the palm's ``axis`` (:data:`AXES`;
    'x': the fingers tip over to the palm's side).

    A **push** (``push``: ((joint, target rad), ...), the hand standing upright: ``rate`` 0): the fingers
    open, the joints move at constant speeds from where they stand to their targets in ``push_s`` s
    (:func:`~shadow_twin.calibration.contacts.tilt.push_trajectory`), a finger pushing the object across
    its support, recorded for ``duration`` s from the push's start: the support's friction against the
    object's weight, seen in the object's path and the pushing joints' efforts."""

    name: str
    grip: bool
    rate: float
    duration: float
    axis: str = 'x'
    push: tuple[tuple[str, float], ...] = ()
    push_s: float = 0.0

    def tilt_at(self, t: np.ndarray | float) -> np.ndarray | float:
        """The tilt (rad) ``t`` s into the run."""
        return self.rate * np.asarray(t)


@dataclass(frozen=True)
class ContactProtocol:
    """The protocol (module doc). ``scene`` is an absolute path; lengths in m, times in s, angles in rad;
    ``onset_window`` in samples. ``effort_change``: the grip's efforts are compared by their change since the
    tilt began (the mean of its first ``onset_window`` samples; :func:`~.tilt.residuals`): on the robots the
    squeeze a grip holds does not repeat from run to replay; False compares them as recorded. ``onset_weight``
    (m per rad; YAML mm per deg): a run whose recording slides (an onset) is compared by its onset angle too, one
    degree off counting as the path one mm off throughout (:meth:`~.evaluator.ContactEvaluator.residuals`).
    ``diff_step``: the least-squares phases' forward-difference steps (fractions of each search range, tried in
    turn; empty: the engine's own; the fit ends when its step falls below the finest): a replay parts from
    another at parameter changes of 1e-5 (contacts made a step earlier or later), so a fine step differentiates
    that noise
    (:attr:`~shadow_twin.calibration.engine.run_settings.CalibrationSettings.diff_step`). ``fit``: the search
    space's parameters the runs identify, fitted when the caller names none (empty: the screening picks); names,
    checked against the space by its user."""

    scene: Path
    object: str
    palm: str
    grip: dict[str, float]
    close_s: float
    settle_s: float
    settle_open_s: float
    sample_s: float
    onset: float
    onset_window: int
    clip: float
    effort_weight: float
    runs: tuple[TiltRun, ...]
    holdout: tuple[TiltRun, ...]
    live: 'LiveSetup | None' = None
    effort_change: bool = True
    onset_weight: float = 0.0
    diff_step: tuple[float, ...] = ()
    fit: tuple[str, ...] = ()

    @classmethod
    def from_yaml(cls, path: str | Path) -> 'ContactProtocol':
        """Read a protocol file (top-level key ``contact_protocol``). Raises ConfigError (one line)
        naming the file and the key of a missing or bad value."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding='utf-8')) or {}
        except OSError as exc:
            raise ConfigError(f'contact protocol not readable: {path} ({exc.strerror or exc})') from None
        except yaml.YAMLError as exc:
            raise ConfigError(f'{path}: not valid YAML: {" ".join(str(exc).split())}') from None
        where = f'{path}: contact_protocol'
        body = values.mapping(data.get('contact_protocol') if isinstance(data, dict) else None, where, _KEYS)
        for key in ('scene', 'object', 'palm', 'grip', 'runs'):
            if key not in body:
                raise ConfigError(f'{where}: missing {key!r}')
        grip = body['grip']
        if not isinstance(grip, dict) or not grip:
            raise ConfigError(f'{where}.grip: give the closed grip\'s joint targets (rad)')
        runs = _runs(body['runs'], f'{where}.runs')
        holdout = _runs(body.get('holdout', []), f'{where}.holdout', allow_empty=True)
        names = [r.name for r in (*runs, *holdout)]
        if len(set(names)) != len(names):
            raise ConfigError(f'{where}: run names repeat: {names}')
        pushes = [r.name for r in holdout if r.push]
        if pushes:
            raise ConfigError(f'{where}.holdout: push run(s) {pushes} have no slip-onset angle to check; hold out tilts')
        for run in runs:
            outside = [j for j, _ in run.push if j not in grip]
            if outside:
                raise ConfigError(f'{where}.runs: push run {run.name!r} moves {outside}, which are not grip joints '
                                  '(the protocol records the grip joints\' efforts)')
        for key in ('object', 'palm'):
            if not isinstance(body[key], str) or not body[key]:
                raise ConfigError(f'{where}.{key}: expected a body name, got {body[key]!r}')
        sample_s = values.positive(body.get('sample_s', 0.02), f'{where}.sample_s')
        window_s = values.non_negative(body.get('onset_window_s', 0.2), f'{where}.onset_window_s')
        return cls(path.parent / str(body['scene']), body['object'], body['palm'],
                   {str(k): values.number(v, f'{where}.grip.{k}') for k, v in grip.items()},
                   values.positive(body.get('close_s', 1.0), f'{where}.close_s'),
                   values.non_negative(body.get('settle_s', 8.0), f'{where}.settle_s'),
                   values.non_negative(body.get('settle_open_s', 0.5), f'{where}.settle_open_s'),
                   sample_s, values.positive(body.get('onset_mm', 1.0), f'{where}.onset_mm') * 1e-3,
                   max(1, int(round(window_s / sample_s))),
                   values.positive(body.get('clip_mm', 20.0), f'{where}.clip_mm') * 1e-3,
                   values.non_negative(body.get('effort_weight', 0.1), f'{where}.effort_weight'), runs, holdout,
                   _live(body.get('live'), f'{where}.live', path.parent),
                   values.boolean(body.get('effort_change', True), f'{where}.effort_change'),
                   values.non_negative(body.get('onset_weight', 0.0), f'{where}.onset_weight') * 1e-3 * 180.0 / np.pi,
                   _steps(body.get('diff_step', []), f'{where}.diff_step'), _names(body.get('fit', []), f'{where}.fit'))


def _names(item: Any, where: str) -> tuple[str, ...]:
    """The ``fit`` list: distinct parameter names."""
    if not isinstance(item, list) or not all(isinstance(n, str) and n for n in item):
        raise ConfigError(f'{where}: expected a list of the search space\'s parameter names, got {item!r}')
    if len(set(item)) != len(item):
        raise ConfigError(f'{where}: names repeat: {item}')
    return tuple(item)


def _steps(item: Any, where: str) -> tuple[float, ...]:
    """The ``diff_step`` list: fractions of a range in (0, 0.5)."""
    if not isinstance(item, list):
        raise ConfigError(f'{where}: expected a list of steps (fractions of each range), got {item!r}')
    steps = tuple(values.number(v, f'{where}[{k}]') for k, v in enumerate(item))
    bad = [h for h in steps if not 0.0 < h < 0.5]
    if bad:
        raise ConfigError(f'{where}: steps must be in (0, 0.5) of each range, got {bad}')
    return steps


@dataclass(frozen=True)
class LiveSetup:
    """How the runs are made on the robots: ``scene`` (absolute path) is the robots' scene (the protocol's
    fixture fixed to the forearm), ``arm_start`` {arm joint: rad} the pose each run starts from (the
    forearm upright, as the hand stands in the protocol's scene), reached in ``positioning_s`` s. ``park``
    (m, world; None: not used) is where the object is put while the arm positions, out of the robots' reach
    (by the mock hardware's and the sim's ``set_entity_state``): a run ends with the object wherever it
    fell, on the arm too, and the twin's preview refuses a positioning that would carry it along."""

    scene: Path
    arm_start: dict[str, float]
    positioning_s: float = 3.0
    park: tuple[float, float, float] | None = None


def _live(item: Any, where: str, folder: Path) -> LiveSetup | None:
    """The ``live`` section (None without one)."""
    if item is None:
        return None
    body = values.mapping(item, where, ('scene', 'arm_start', 'positioning_s', 'park'))
    if not isinstance(body.get('scene'), str) or not isinstance(body.get('arm_start'), dict) or not body['arm_start']:
        raise ConfigError(f'{where}: give scene (the robots\' scene file) and arm_start ({{arm joint: rad}})')
    park = body.get('park')
    if park is not None and (not isinstance(park, list) or len(park) != 3):
        raise ConfigError(f'{where}.park: expected [x, y, z] (m, world), got {park!r}')
    return LiveSetup(folder / body['scene'],
                     {str(k): values.number(v, f'{where}.arm_start.{k}') for k, v in body['arm_start'].items()},
                     values.positive(body.get('positioning_s', 3.0), f'{where}.positioning_s'),
                     None if park is None else tuple(values.number(v, f'{where}.park[{k}]') for k, v in enumerate(park)))


def _runs(items: Any, where: str, allow_empty: bool = False) -> tuple[TiltRun, ...]:
    if not isinstance(items, list) or (not items and not allow_empty):
        raise ConfigError(f'{where}: expected a list of runs, got {items!r}')
    out = []
    for k, item in enumerate(items):
        run = values.mapping(item, f'{where}[{k}]', _RUN_KEYS)
        name = run.get('name')
        if not isinstance(name, str) or not name:
            raise ConfigError(f'{where}[{k}].name: expected a name, got {name!r}')
        axis = run.get('axis', 'x')
        if axis not in AXES:
            raise ConfigError(f'{where}[{k}].axis: expected one of {list(AXES)}, got {axis!r}')
        duration = values.positive(run.get('duration'), f'{where}[{k}].duration')
        if 'push' in run:
            out.append(_push(run, f'{where}[{k}]', name, axis, duration))
            continue
        grip = values.boolean(run.get('grip'), f'{where}[{k}].grip')
        out.append(TiltRun(name, grip, np.radians(values.positive(run.get('rate'), f'{where}[{k}].rate')),
                           duration, axis))
    return tuple(out)


def _push(run: dict, where: str, name: str, axis: str, duration: float) -> TiltRun:
    """A push run (:class:`TiltRun`): ``push`` {joint: target rad}, ``push_s`` s (<= ``duration``), the
    fingers open and no tilt."""
    push = run['push']
    if not isinstance(push, dict) or not push:
        raise ConfigError(f'{where}.push: give the pushing joints\' targets ({{joint: rad}}), got {push!r}')
    if run.get('grip', False) is not False or run.get('rate', 0) not in (0, 0.0):
        raise ConfigError(f'{where}: a push run starts with the fingers open and the hand upright: no grip, no rate')
    push_s = values.positive(run.get('push_s'), f'{where}.push_s')
    if push_s > duration:
        raise ConfigError(f'{where}.push_s: {push_s:g} s is longer than the run ({duration:g} s)')
    targets = tuple((str(j), values.number(v, f'{where}.push.{j}')) for j, v in push.items())
    return TiltRun(name, False, 0.0, duration, axis, targets, push_s)
