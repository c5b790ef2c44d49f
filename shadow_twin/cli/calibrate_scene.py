"""``shadow-twin calibrate --contacts``: calibrate a scene's contact parameters (objects' friction,
softness, mass) offline from the bags of the contact protocol's runs.

    shadow-twin calibrate --contacts [contacts | PROTOCOL.yaml] --bags DIR --out DIR [--scene FILE.yaml]
                          [--space FILE.yaml] [--fit NAME ... | --screen K [--screen-samples N]]
                          [--hand-model HAND.xml] [--budget N] [--workers N] [--seed N]
                          [--joint-states-topic T] [--object-topic T] [--palm-topic T] [--contacts-prefix P]
                          [--install [BRIDGE]]
                          [--record [--action A] [--place-service S] [--start-lead S] [--cell-config FILE]]

``--record``: first make the protocol's runs on the robots through the twin and record them into
``--bags`` (a new folder; :mod:`calibration_node.contact_runner`: the protocol's ``live`` section says
how: the robots' scene, the arm's start pose), then fit them as below. ``--place-service``: the services
that put the object on its fixture before each run (default the sim bridge's; with mock hardware its
``/mock_hardware/set_entity_state`` too; on the real cell the operator puts it there and the run checks).
Runs made on the robots (``--record``, or ``--cell-config`` for bags recorded there before) are replayed as
the robots make them: on the cell reduced to arm and hand (``--out``/robots_model.xml) with the protocol's
live scene, the arm turning the hand (:func:`~shadow_twin.calibration.contacts.live.record_runs_on_robots`).

The bags are one per run of the protocol, named after it (``DIR/tilt_open``...; the hold-out runs'
bags are optional: without one a hold-out is not checked); what each holds is
:mod:`shadow_twin.calibration.contacts.bags`'. The job is
:class:`~shadow_twin.calibration.jobs.contact_job.ContactCalibrationJob` (this command gives its inputs, prints,
records and installs):
:func:`~shadow_twin.calibration.contacts.fit.calibrate_contacts` of the parameters ``--fit`` names, else of
those the protocol names (its ``fit``: what its runs identify), else (``--screen K``, or a protocol naming none)
of the K most influential by a screening of ``--screen-samples`` parameter sets; the default optimiser, the
hold-out runs' slip-onset angles before and after. ``--hand-model``: the hand's calibrated MJCF (calibrate the
hand first: its fingers move the object too). ``--scene``: the scene file the runs were made with
(default: the protocol's; as ``--scene`` of the other calibrations, the objects simulated with the hand).
Written to ``--out``: ``scene.yaml`` (a copy of that scene file with the fitted values: install it with the bridge's ``scene_file`` and reload),
``report.json``, ``runs.png`` (each run, robot against the sim as given and calibrated:
:mod:`shadow_twin.plots.contact_runs`) and the engine's checkpoint. ``--install``: when accepted, the running bridge (default
``/mujoco_bridge``) gets the calibrated scene as its ``scene_file`` and reloads (the objects keep their
poses; a failed reload leaves the bridge as it was, and the command exits 1).

Exit status: 0 accepted (the objective fell and no hold-out run got worse: its slip onset, or without a slip
its residual RMS), 3 refused (the scene is
still written, for inspection), 2 bad input (one line ``shadow-twin calibrate: error: ...``: a run
without a bag, a bag without the topics, an unknown parameter name, an existing ``--out``), nothing written.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from calibration_node.bridge_link import BridgeLink
from calibration_node.contact_runner import ContactRunRecorder, ContactRunSettings
from shadow_twin.calibration.contacts.bags import ContactTopics
from shadow_twin.calibration.contacts.fit import DEFAULT_BUDGET, ContactFit
from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.calibration.engine.run_settings import CalibrationSettings
from shadow_twin.calibration.jobs.contact_job import (DEFAULT_KEEP, SCREEN_SAMPLES, SPACE, ContactCalibrationJob,
                                                      ContactJobSpec, protocol_bags)
from shadow_twin.cli.errors import ErrorLineParser, run_reporting_errors
from shadow_twin.cli.inputs import nonnegative_int, positive_int
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.paths import config_path
from shadow_twin.model.cell.assembly import arm_joint_names, build_cell_spec
from shadow_twin.model.cell.config import CellConfig
from shadow_twin.model.scene import SceneConfig, add_objects
from shadow_twin.ros.calibration_client import SpinningNode

PROG = 'shadow-twin calibrate'
#: The shipped protocol (``--contacts contacts``).
PROTOCOL = config_path('calibration', 'contact_protocol.yaml')


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``shadow-twin calibrate --contacts``."""
    p = ErrorLineParser(prog=f'{PROG} --contacts', description=__doc__.split('\n\n')[0])
    p.add_argument('--contacts', required=True, metavar='contacts|FILE.yaml',
                   help='the contact protocol: contacts (config/calibration/contact_protocol.yaml) or a file')
    p.add_argument('--scene', type=Path, help="the scene file of the runs (default: the protocol's)")
    p.add_argument('--bags', type=Path, required=True, help='folder with one bag per protocol run, named after it')
    p.add_argument('--out', type=Path, required=True, help='output folder (must not exist)')
    p.add_argument('--space', type=Path, default=SPACE, help='search space (default config/calibration/hand_contacts.yaml)')
    p.add_argument('--fit', nargs='+', metavar='NAME', help="the space's parameters to fit (default: the protocol's fit)")
    p.add_argument('--screen', type=positive_int, metavar='K',
                   help="screen the space first and fit only its K most influential parameters (as calibrate --screen; "
                        f"default: the protocol's fit, no screening; a protocol that names none: K {DEFAULT_KEEP})")
    p.add_argument('--screen-samples', type=positive_int, metavar='N', default=SCREEN_SAMPLES,
                   help=f'parameter sets of the screening (default {SCREEN_SAMPLES})')
    p.add_argument('--hand-model', type=Path, help="the hand's MJCF (default: the built-in Shadow Hand E)")
    p.add_argument('--budget', type=positive_int, default=DEFAULT_BUDGET,
                   help=f'evaluations of the fit (default {DEFAULT_BUDGET})')
    p.add_argument('--workers', type=positive_int, default=2, help='simulations in parallel (processes; default 2)')
    p.add_argument('--seed', type=nonnegative_int, default=0, help='random seed, an integer >= 0 (default: 0)')
    p.add_argument('--joint-states-topic', default=ContactTopics.joint_states, help='JointState with the grip efforts')
    p.add_argument('--object-topic', help='PoseStamped of the object (default /mocap/<object>/pose)')
    p.add_argument('--palm-topic', help="PoseStamped of the palm's frame (default /mocap/<palm>/pose)")
    p.add_argument('--contacts-prefix', default=ContactTopics.contacts,
                   help="with --record: the hand's contact topics, <prefix>/<label>/wrench, recorded where published "
                        f"('' for none; default {ContactTopics.contacts})")
    p.add_argument('--install', nargs='?', const='/mujoco_bridge', metavar='BRIDGE',
                   help="when accepted, reload the running bridge with the calibrated scene (default /mujoco_bridge)")
    p.add_argument('--record', action='store_true', help="record the runs on the robots first, into --bags (new)")
    p.add_argument('--action', default='/twin/follow_joint_trajectory', help="with --record: the twin's action")
    p.add_argument('--place-service', nargs='+', default=['/mujoco_bridge/set_entity_state'], metavar='SERVICE',
                   help="with --record: SetEntityState services that put the object on its fixture before each run "
                        "(default the sim bridge's; add the mock hardware's, /mock_hardware/set_entity_state)")
    p.add_argument('--start-lead', type=float, default=1.0,
                   help="s between sending a goal and its start (--record; the replay of runs on the robots waits as long)")
    p.add_argument('--cell-config', type=Path,
                   help="the runs were made on the cell of this YAML (--record: default config/cell.yaml): they are "
                        'replayed as the robots make them, on the cell reduced to arm and hand')
    return p


#: The job's settings by this command's options (its errors name them).
OPTION_NAMES = {'space_file': '--space', 'hand_model': '--hand-model', 'fit': '--fit', 'screen': '--screen',
                'screen_samples': '--screen-samples'}


def run(args: argparse.Namespace) -> int:
    """Check the inputs, calibrate, print; returns the exit status (see module doc)."""
    protocol = ContactProtocol.from_yaml(PROTOCOL if args.contacts == 'contacts' else args.contacts)
    if args.scene is not None:
        if not args.scene.is_file():
            raise ConfigError(f'--scene {args.scene} does not exist')
        protocol = dataclasses.replace(protocol, scene=args.scene)
    if args.out.exists():
        raise ConfigError(f'--out {args.out} exists; choose a new folder (results are never overwritten)')
    job = ContactCalibrationJob(ContactJobSpec(        # its checks before anything is recorded
        protocol, args.space, tuple(args.fit or ()), args.screen, args.screen_samples, args.hand_model,
        ContactTopics(args.joint_states_topic, args.object_topic, args.palm_topic),
        CalibrationSettings(budget=args.budget, workers=args.workers, seed=args.seed),
        (args.cell_config or config_path('cell.yaml')) if (args.record or args.cell_config) else None,
        args.start_lead, OPTION_NAMES), args.out)
    if args.record:
        record_runs(args, protocol)
    bags = protocol_bags(args.bags, protocol)
    recordings = job.read(bags)            # a bag that does not read: one error line, nothing written
    print(f'{PROG}: {len(recordings)} runs of {protocol.scene.name} ({", ".join(recordings)}); output {args.out}; '
          f'{job.describe()}', flush=True)
    done = job.run(bags, recordings, progress=lambda line: print(f'  {line}', flush=True))
    for line in done.summary():
        print(line)
    print(f'{"accepted" if done.accept else "refused"}: {done.reason}')
    print(f'calibrated scene: {done.scene}; report: {done.report}; the runs drawn: {done.figure}')
    if not done.accept:
        return ExitCode.REFUSED
    if args.install:
        installed, what = install_scene(done.scene, args.install, done.fit, args.out)
        print(f'{"installed" if installed else "not installed"}: {what}')
        if not installed:
            return ExitCode.FAILED
    return ExitCode.OK


def install_scene(scene: Path, bridge: str, fit: ContactFit | None = None, out: Path | None = None,
                  timeout: float = 10.0) -> tuple[bool, str]:
    """Install the fit in the running ``bridge`` node and reload it (the calibration node's
    :class:`~calibration_node.bridge_link.BridgeLink`); (installed, what happened). With ``fit`` and ``out``:
    :meth:`~calibration_node.bridge_link.BridgeLink.install_fitted_scene` (a bridge running a scene file gets
    that file with the fitted values); without, the bridge gets ``scene``."""
    ros = SpinningNode('calibrate_contacts_install')
    try:
        link = BridgeLink(ros.node, bridge, timeout)
        if fit is not None and out is not None:
            return link.install_fitted_scene(scene, fit.targets, out)
        if link.scene_file() is None:
            return False, f'no answer from {bridge}'
        return link.install_scene(str(Path(scene).resolve()))
    finally:
        ros.close()


def record_runs(args: argparse.Namespace, protocol: ContactProtocol) -> None:
    """``--record``: the protocol's runs on the robots into ``args.bags`` (module doc). Raises ConfigError
    (an existing --bags, no live section), TrajectoryError (a run failed; the bags recorded are kept)."""
    if args.bags.exists():
        raise ConfigError(f'--bags {args.bags} exists; --record writes a new folder (recordings are never overwritten)')
    if protocol.live is None:
        raise ConfigError(f'{PROTOCOL.name if args.contacts == "contacts" else args.contacts}: no live section: '
                          'the protocol cannot be run on the robots')
    spec = build_cell_spec(CellConfig.from_yaml(args.cell_config or config_path('cell.yaml')))
    add_objects(spec, SceneConfig.from_yaml(protocol.live.scene))
    model = spec.compile()
    topics = ContactTopics(args.joint_states_topic, args.object_topic, args.palm_topic, args.contacts_prefix)
    settings = ContactRunSettings(args.action, tuple(args.place_service), topics, args.start_lead, tuple(arm_joint_names()))
    ros = SpinningNode('calibrate_contacts_record')
    try:
        runner = ContactRunRecorder(ros.node, protocol, model, settings)
        try:
            for run in (*protocol.runs, *protocol.holdout):
                runner.plan(run)                              # every run's plan first: a bad pose moves nothing
            args.bags.mkdir(parents=True)
            for run in (*protocol.runs, *protocol.holdout):
                print(f'{PROG}: recording {run.name} on the robots', flush=True)
                counts = runner.record(run, args.bags / run.name)
                print(f'  {run.name}: ' + ', '.join(f'{topic} {n}' for topic, n in counts.items()), flush=True)
        finally:
            runner.close()
    finally:
        ros.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0, 3, or 2 after one error line on stderr)."""
    logging.basicConfig(level=logging.WARNING, format='[%(levelname)s] %(name)s: %(message)s')
    return run_reporting_errors(PROG, lambda a: run(build_parser().parse_args(a)),
                                sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
