"""Calibrate a scene's contact parameters from the bags of the contact protocol's runs (ROS-free).

The core of ``shadow-twin calibrate --contacts`` (:mod:`shadow_twin.cli.calibrate_scene`: the arguments, the
runs recorded on the robots, the install in the bridge). A job:

1. checks its inputs and reads every run's bag (:func:`~shadow_twin.calibration.contacts.bags.read_tilt_run`)
   before it writes anything;
2. fits the parameters the caller names (``fit``), else those the protocol names (its ``fit``: what its runs
   identify), else the ``screen`` most influential by a screening of ``screen_samples`` parameter sets
   (:func:`~shadow_twin.calibration.contacts.fit.calibrate_contacts`: the default optimiser, the hold-out
   runs before and after), replaying the runs hand-alone or, for runs made on the robots (``cell_config``),
   as the robots made them (the cell reduced to arm and hand, each run by its plan);
3. decides (:func:`verdict`): the objective fell and no hold-out run got worse;
4. writes ``scene.yaml`` (a copy of the protocol's scene with the fitted values), ``report.json`` and
   ``runs.png`` (each run, robot against the sim as given and calibrated).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import mujoco
import numpy as np

from shadow_twin.calibration.contacts.bags import ContactTopics, read_tilt_run
from shadow_twin.calibration.contacts.evaluator import HandModel
from shadow_twin.calibration.contacts.fit import (DEFAULT_BUDGET, ContactFit, calibrate_contacts, onset_degrees,
                                                  write_calibrated_scene)
from shadow_twin.calibration.contacts.live import plan_live_tilt
from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.calibration.contacts.tilt import TiltRecord
from shadow_twin.calibration.engine.run_settings import CalibrationSettings
from shadow_twin.calibration.engine.sensitivity import MIN_SAMPLES
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.common.paths import config_path
from shadow_twin.model.cell.assembly import arm_joint_names
from shadow_twin.model.cell.config import CellConfig
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.model.mock_models import write_hand_stand_in_mjcf
from shadow_twin.model.scene import SceneConfig, add_objects
from shadow_twin.plots.contact_runs import plot_contact_runs

#: The shipped search space of contact parameters.
SPACE = config_path('calibration', 'hand_contacts.yaml')
#: Parameter sets of a screening, and the parameters it keeps when the caller gives no number (a protocol
#: that names no ``fit``).
SCREEN_SAMPLES = 16
DEFAULT_KEEP = 3
REPORT = 'report.json'
SCENE = 'scene.yaml'
FIGURE = 'runs.png'


@dataclass(frozen=True)
class ContactJobSpec:
    """What a contact calibration needs.

    Attributes:
        protocol: the runs and how they were made (its ``scene``: the scene file the runs were made with).
        space_file: the search space YAML (:data:`SPACE`).
        fit: the parameters the caller names (empty: the protocol's ``fit``, else the screening's).
        screen: K, the screening's kept parameters (None: no screening unless the protocol names no ``fit``,
            then :data:`DEFAULT_KEEP`); not with ``fit``.
        screen_samples: parameter sets of the screening (at least ``MIN_SAMPLES``).
        hand_model: the hand's MJCF (None: the built-in Shadow Hand E; calibrate the hand first).
        topics: the topics of the bags.
        settings: the engine's settings (budget, workers, seed).
        cell_config: the runs were made on this cell (None: hand-alone runs): replayed as the robots make them,
            on the cell reduced to arm and hand with the protocol's live scene.
        start_lead: s between a goal's sending and its start when the runs were made on the robots.
        names: how the caller calls these settings in its errors ({field: name}: the command's options, the
            node's parameters; :data:`SETTING_NAMES` for those it leaves out).
    """

    protocol: ContactProtocol
    space_file: Path = SPACE
    fit: tuple[str, ...] = ()
    screen: int | None = None
    screen_samples: int = SCREEN_SAMPLES
    hand_model: Path | None = None
    topics: ContactTopics = ContactTopics()
    settings: CalibrationSettings = field(default_factory=lambda: CalibrationSettings(budget=DEFAULT_BUDGET))
    cell_config: Path | None = None
    start_lead: float = 1.0
    names: Mapping[str, str] = field(default_factory=dict)

    def name(self, setting: str) -> str:
        """What the caller calls ``setting`` (a field of this spec)."""
        return self.names.get(setting, SETTING_NAMES[setting])


#: The settings' names in the job's errors where the caller names them not (:attr:`ContactJobSpec.names`).
SETTING_NAMES = {'space_file': 'space file', 'hand_model': 'hand model', 'fit': 'fit', 'screen': 'screen',
                 'screen_samples': 'screen samples'}


@dataclass(frozen=True)
class ContactJobResult:
    """A finished job: the ``fit``, whether it is accepted and why, and the files written."""

    fit: ContactFit
    accept: bool
    reason: str
    scene: Path
    report: Path
    figure: Path

    def summary(self) -> list[str]:
        """Printed lines: the screening, the fitted values, the objective, the hold-outs (:func:`summary`)."""
        return summary(self.fit)


def protocol_bags(folder: Path, protocol: ContactProtocol) -> dict[str, Path]:
    """{run: bag} of ``folder`` (a bag per run, named after it): every fitted run's, the hold-outs' found.
    Raises ConfigError: not a folder, or a fitted run without a bag (naming them)."""
    if not folder.is_dir():
        raise ConfigError(f'--bags {folder} is not a folder')
    found = {run.name: folder / run.name for run in (*protocol.runs, *protocol.holdout) if (folder / run.name).exists()}
    missing = [run.name for run in protocol.runs if run.name not in found]
    if missing:
        raise ConfigError(f'no bag in {folder} for the protocol run(s) {missing}')
    return found


class ContactCalibrationJob:
    """One contact calibration (module doc) into ``out_dir`` (made by :meth:`run`, after every check). Built
    before the runs are recorded, it checks what it can first: a recording on the robots is not spent on a
    misspelt parameter name.

    Raises:
        ConfigError: a file that does not exist, ``fit`` with ``screen``, too few screening samples, a name the
            search space lacks (the caller's or the protocol's, said which).
    """

    def __init__(self, spec: ContactJobSpec, out_dir: str | Path) -> None:
        self.spec, self.out_dir = spec, Path(out_dir)
        for what, path in (('space_file', spec.space_file), ('hand_model', spec.hand_model)):
            if path is not None and not Path(path).is_file():
                raise ConfigError(f'{spec.name(what)} {path} does not exist')
        if spec.fit and spec.screen is not None:
            raise ConfigError(f'{spec.name("fit")} names the parameters, {spec.name("screen")} lets the screening '
                              f'pick them: give one')
        self.fitted, self.source = ((list(spec.fit), spec.name('fit')) if spec.fit else
                                    (list(spec.protocol.fit), "the protocol's fit")
                                    if spec.screen is None and spec.protocol.fit else ([], ''))
        self.keep = spec.screen or DEFAULT_KEEP
        if not self.fitted and spec.screen_samples < MIN_SAMPLES:
            raise ConfigError(f'{spec.name("screen_samples")} must be at least {MIN_SAMPLES}, '
                              f'got {spec.screen_samples}')
        self.scene = SceneConfig.from_yaml(spec.protocol.scene)
        self.model = str(spec.hand_model) if spec.hand_model else None
        space = SearchSpace.from_yaml(spec.space_file, TwinModel(self.model, edit=lambda s: add_objects(s, self.scene)))
        unknown = [name for name in self.fitted if name not in space.names]
        if unknown:
            raise ConfigError(f'{self.source} {unknown}: not in {Path(spec.space_file).name} ({", ".join(space.names)})')
        self.space = space.subset(self.fitted) if self.fitted else space
        self.runs = {run.name: run for run in (*spec.protocol.runs, *spec.protocol.holdout)}

    def describe(self) -> str:
        """What is fitted: 'fitting NAMES (where from)', or 'the screening picks K parameters'."""
        return (f'fitting {", ".join(self.fitted)} ({self.source})' if self.fitted
                else f'the screening picks {self.keep} parameters')

    def read(self, bags: Mapping[str, Path]) -> dict[str, TiltRecord]:
        """{run: record} of ``bags`` ({run name: bag}: every fitted run's, the hold-outs' recorded;
        :func:`protocol_bags`). Raises RecordingError naming a bag that lacks a topic or does not read."""
        protocol = self.spec.protocol
        return {name: read_tilt_run(bag, protocol, self.runs[name], self.spec.topics) for name, bag in bags.items()}

    def run(self, bags: Mapping[str, Path], recordings: Mapping[str, TiltRecord] | None = None,
            progress: Callable[[str], None] | None = None) -> ContactJobResult:
        """Fit the runs of ``bags`` (their ``recordings`` if read already), decide and write (module doc)."""
        spec, protocol = self.spec, self.spec.protocol
        recordings = dict(recordings if recordings is not None else self.read(bags))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        fit = calibrate_contacts(protocol, recordings, self.space, self.out_dir, spec.settings,
                                 screen_samples=0 if self.fitted else spec.screen_samples,
                                 keep=0 if self.fitted else self.keep, progress=progress,
                                 hand=self._robots_hand() or HandModel(self.scene, self.model))
        scene = write_calibrated_scene(protocol.scene, fit.targets, self.out_dir / SCENE)
        accept, reason = verdict(fit)
        report_path = write_text_atomic(self.out_dir / REPORT,
                                        json.dumps(report(fit, accept, reason, bags), indent=2))
        figure = plot_contact_runs(self.out_dir / FIGURE, recordings, fit.replays, [r.name for r in protocol.holdout],
                                   protocol.onset, {name: run.rate for name, run in self.runs.items()})
        return ContactJobResult(fit, accept, reason, scene, report_path, figure)

    def _robots_hand(self) -> HandModel | None:
        """For runs made on the robots (``cell_config``): the replay as the robots make them, on the cell reduced
        to arm and hand (written to ``out_dir``/robots_model.xml; the hand model's hand) with the protocol's live
        scene, each run by its plan; None: the hand-alone replay."""
        spec, protocol = self.spec, self.spec.protocol
        if spec.cell_config is None:
            return None
        if protocol.live is None:
            raise ConfigError('the protocol has no live section: runs on the robots cannot be replayed as they were made')
        path = write_hand_stand_in_mjcf(CellConfig.from_yaml(spec.cell_config), self.out_dir / 'robots_model.xml',
                                        hand_path=self.model)
        scene = SceneConfig.from_yaml(protocol.live.scene)
        model_spec = mujoco.MjSpec.from_file(str(path))
        add_objects(model_spec, scene)
        compiled = model_spec.compile()
        plans = {name: dataclasses.replace(plan_live_tilt(compiled, protocol, run, list(arm_joint_names())),
                                           lead=spec.start_lead) for name, run in self.runs.items()}
        return HandModel(scene, str(path), plans=plans, gains=str(config_path('controllers', 'cell.yaml')))


def verdict(fit: ContactFit) -> tuple[bool, str]:
    """(accepted, why): the objective fell and no hold-out run's onset error grew."""
    result = fit.result
    if not result.best.objective < result.initial.objective:
        return False, f'nothing better than the scene as given ({result.initial.objective:.4g} m^2) was found'
    worse = fit.holdout_worse()         # an onset lost (NaN) counts as worse
    if worse:
        return False, f'hold-out run(s) {worse} got worse (the slip onset, or the residuals of a run without a slip)'
    return True, (f'objective {result.initial.objective:.4g} -> {result.best.objective:.4g} m^2'
                  + (f'; hold-out runs no worse ({len(fit.holdout)})' if fit.holdout else '; no hold-out run recorded'))


def summary(fit: ContactFit) -> list[str]:
    """Printed lines: the screening, the fitted values, the objective, the hold-outs."""
    result = fit.result
    lines = []
    if fit.influence:
        lines.append('screening: ' + ', '.join(f'{k} {v:+.2f}' for k, v in fit.influence.items()))
    lines.append('fitted: ' + ', '.join(f'{k} {v:.4g}' for k, v in fit.values.items()))
    lines.append(f'objective {result.initial.objective:.4g} -> {result.best.objective:.4g} m^2 (RMS '
                 f'{np.sqrt(result.initial.objective) * 1e3:.2f} -> {np.sqrt(result.best.objective) * 1e3:.2f} mm), '
                 f'{len(result.evaluations)} evaluations, {fit.seconds:.1f} s')
    lines += [f'hold-out {name} slip onset: {onset_degrees(angles)}; residual RMS '
              f'{fit.holdout_rms[name]["before"] * 1e3:.2f} -> {fit.holdout_rms[name]["after"] * 1e3:.2f} mm'
              for name, angles in fit.holdout.items()]
    return lines


def report(fit: ContactFit, accept: bool, reason: str, bags: Mapping[str, Path]) -> dict:
    """report.json: inputs, values, objectives, hold-out onsets (deg), the engine's phases."""
    result = fit.result
    return {'accepted': accept, 'reason': reason, 'bags': {k: str(v) for k, v in bags.items()},
            'values': fit.values, 'influence': fit.influence,
            'objective': {'initial': result.initial.objective, 'best': result.best.objective},
            'holdout_onset_deg': {name: {k: float(np.degrees(v)) for k, v in angles.items()}
                                  for name, angles in fit.holdout.items()},
            'holdout_rms_mm': {name: {k: v * 1e3 for k, v in rms.items()} for name, rms in fit.holdout_rms.items()},
            'evaluations': len(result.evaluations), 'seconds': fit.seconds, 'phase_log': result.phase_log}
