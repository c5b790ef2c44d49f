"""The contact calibration protocol (issue 37): which runs are recorded, and how.

The hand holds (or just stands by) an object resting on a support, and the arm turns the hand slowly
about the palm's x axis, turning gravity in the hand's frame, until the object slips; each run is one
tilt at a fixed rate (``rate`` deg/s) for ``duration`` s, the fingers open (``grip: false``: the
object slides or tips on its support alone, so the support's friction decides) or closed to the
protocol's ``grip`` targets (the fingertips' friction, the grip's force and the object's weight
decide). Runs at other rates are the hold-out: their slip-onset angle (the tilt at which the object
has moved ``onset_mm`` in the palm's frame) is compared, sim against the robot.

YAML (``config/calibration/contact_protocol.yaml``)::

    contact_protocol:
      scene: scene_hand.yaml      # the scene file (relative to this file's folder)
      object: can                 # the free object observed
      palm: rh_palm               # the body whose frame the object's position is read in
      grip: {rh_FFJ3: 1.0, ...}   # joint targets of the closed grip, rad
      close_s: 1.0                # s to close the grip; then settle_s s of holding before the tilt
      settle_s: 8.0
      settle_open_s: 0.5          # s before a run with the fingers open
      sample_s: 0.02              # s between samples (the capture's 50 Hz)
      onset_mm: 1.0               # mm: the slip onset ...
      onset_window_s: 0.2         # ... of the positions averaged over this long (a capture's noise)
      clip_mm: 20.0               # mm: a residual's soft limit (an object that fell is far off either way)
      effort_weight: 0.1          # m per N m: the grip joints' efforts beside the object's position
      effort_change: true         # efforts compared by their change since the tilt began (false: as recorded)
      runs:    [{name: tilt_open, grip: false, rate: 10.0, duration: 5.0, axis: x}, ...]
      holdout: [{name: tilt_grip_holdout, grip: true, rate: 8.0, duration: 8.0}]
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
         'onset_window_s', 'clip_mm', 'effort_weight', 'effort_change', 'runs', 'holdout', 'live')
_RUN_KEYS = ('name', 'grip', 'rate', 'duration', 'axis')
#: The palm-frame axes a run may turn the hand about.
AXES = ('x', '-x', 'y', '-y')


@dataclass(frozen=True)
class TiltRun:
    """One run: ``name``; ``grip`` (the fingers closed to the protocol's grip, else open at their
    initial pose); tilt ``rate`` (rad/s) for ``duration`` (s) about the palm's ``axis`` (:data:`AXES`;
    'x': the fingers tip over to the palm's side)."""

    name: str
    grip: bool
    rate: float
    duration: float
    axis: str = 'x'

    def tilt_at(self, t: np.ndarray | float) -> np.ndarray | float:
        """The tilt (rad) ``t`` s into the run."""
        return self.rate * np.asarray(t)


@dataclass(frozen=True)
class ContactProtocol:
    """The protocol (module doc). ``scene`` is an absolute path; lengths in m, times in s, angles in rad;
    ``onset_window`` in samples. ``effort_change``: the grip's efforts are compared by their change since the
    tilt began (the mean of its first ``onset_window`` samples; :func:`~.tilt.residuals`): on the robots the
    squeeze a grip holds does not repeat from run to replay; False compares them as recorded."""

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
                   values.boolean(body.get('effort_change', True), f'{where}.effort_change'))


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
        grip = values.boolean(run.get('grip'), f'{where}[{k}].grip')
        axis = run.get('axis', 'x')
        if axis not in AXES:
            raise ConfigError(f'{where}[{k}].axis: expected one of {list(AXES)}, got {axis!r}')
        out.append(TiltRun(name, grip, np.radians(values.positive(run.get('rate'), f'{where}[{k}].rate')),
                           values.positive(run.get('duration'), f'{where}[{k}].duration'), axis))
    return tuple(out)
