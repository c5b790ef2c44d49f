"""The contact protocol in the ``calibration_node`` (``protocol:=contacts`` or a contact protocol YAML): a plan
of its runs, the pending ones recorded on the robots through the twin, the job, the install.

* :func:`contact_protocol_file`: whether the ``protocol`` parameter names a contact protocol.
* :func:`contact_plan_fields`: a new plan's fields (its runs as entries, the fitted ones then the held-out ones;
  offline, each bag is the run of its name).
* :class:`ContactSteps`: a run of such a plan on the node. Live, the runs whose bag is not there yet are
  recorded (:class:`~calibration_node.contact_runner.ContactRunRecorder`: a resumed run records only those),
  then :class:`~shadow_twin.calibration.jobs.contact_job.ContactCalibrationJob` fits them into
  ``<run>/contacts`` with its progress on ``~/status``; an accepted fit is installed as the bridge's
  ``scene_file`` and reloaded (:meth:`~calibration_node.bridge_link.BridgeLink.install_fitted_scene`), and
  ``result.json`` ends the run.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from diagnostic_msgs.msg import DiagnosticStatus

from calibration_node.contact_runner import ContactRunRecorder, ContactRunSettings
from shadow_twin.calibration.contacts.bags import ContactTopics
from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.calibration.engine.run_settings import CalibrationSettings
from shadow_twin.calibration.jobs.contact_job import SPACE, ContactCalibrationJob, ContactJobSpec, report
from shadow_twin.calibration.jobs.job import write_result
from shadow_twin.calibration.jobs.plan import LIVE, CalibrationPlan, run_entries
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.paths import config_path, resolve_share_url
from shadow_twin.model.cell.assembly import arm_joint_names, build_cell_spec
from shadow_twin.model.cell.config import CellConfig
from shadow_twin.model.scene import SceneConfig, add_objects

#: The shipped contact protocol (``protocol:=contacts``).
SHIPPED = config_path('calibration', 'contact_protocol.yaml')
#: The job's folder in a run directory.
JOB_DIR = 'contacts'


def contact_protocol_file(value: str) -> Path | None:
    """The contact protocol the ``protocol`` parameter names ('contacts', or a YAML whose top-level key is
    ``contact_protocol``), absolute; None for any other value."""
    value = value.strip()
    if value == 'contacts':
        return SHIPPED.resolve()
    if not value or value == 'cell':
        return None
    path = resolve_share_url(value).expanduser()
    try:
        data = yaml.safe_load(path.read_text(encoding='utf-8'))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None                # not readable here: the cell protocol's reader says why
    return path.resolve() if isinstance(data, dict) and 'contact_protocol' in data else None


def contact_plan_fields(settings, path: Path, bags: list[str]) -> dict:
    """The contact fields of a new plan from the node's ``settings`` (``CalibrationNodeSettings``): the runs of
    the protocol at ``path`` as entries (live: ``bags/<run>``; offline: ``bags``, each the run of its name, the
    fitted runs' required), the space, the hand, the topics, the place services, the cell.

    Raises:
        ConfigError: the protocol does not read, a fitted run without a bag, a bag of no run or two bags of one
            run, a file that does not exist, a bad topic list.
    """
    protocol = ContactProtocol.from_yaml(path)
    # a hold-out without a bag is not checked
    runs = [(run.name, False, True) for run in protocol.runs] + [(run.name, True, False) for run in protocol.holdout]
    try:
        entries = run_entries(runs, bags or None)
    except ConfigError as error:
        raise ConfigError(f'contact protocol {path.name}: {error}') from None
    space = Path(settings.space_file or SPACE)
    hand = Path(settings.model_path).expanduser() if settings.model_path else None
    cell = settings.contact_cell_config or (config_path('cell.yaml') if not bags else '')
    for what, file in (('space_file', space), ('model_path', hand), ('contact_cell_config', cell)):
        if file and not Path(file).is_file():
            raise ConfigError(f'{what} {file} does not exist')
    fit = [name.strip() for name in settings.contact_fit.split(',') if name.strip()]
    topics = [settings.contact_joint_states_topic, settings.contact_object_topic, settings.contact_palm_topic,
              settings.contact_wrench_prefix]
    return dict(space_file=str(space.resolve()), model_path=str(hand.resolve()) if hand else '', gains_file='',
                objective_joints=[], entries=entries,
                contacts={'protocol': str(path), 'topics': topics, 'place_services': list(settings.contact_place_services),
                          'cell_config': str(Path(cell).resolve()) if cell else '', 'fit': fit,
                          'start_lead': float(settings.start_lead)})


def plan_topics(plan: CalibrationPlan) -> ContactTopics:
    """The bag topics of a contact plan (its ``contacts['topics']``; '' = the default)."""
    joint_states, object_pose, palm_pose, prefix = plan.contacts['topics']
    return ContactTopics(joint_states, object_pose or None, palm_pose or None, prefix)


#: The job's settings by the node's parameters (its errors name them).
PARAMETER_NAMES = {'space_file': 'space_file', 'hand_model': 'model_path', 'fit': 'contact_fit'}


def contact_job(plan: CalibrationPlan, run_dir: Path) -> ContactCalibrationJob:
    """The job of a contact plan, into ``run_dir``/:data:`JOB_DIR`. Raises ConfigError (its checks)."""
    c = plan.contacts
    spec = ContactJobSpec(plan.contact_protocol(), Path(plan.space_file), tuple(c['fit']),
                          hand_model=Path(plan.model_path) if plan.model_path else None,
                          topics=plan_topics(plan),
                          settings=CalibrationSettings(**plan.settings),
                          cell_config=Path(c['cell_config']) if c['cell_config'] else None,
                          start_lead=float(c['start_lead']), names=PARAMETER_NAMES)
    return ContactCalibrationJob(spec, Path(run_dir) / JOB_DIR)


def plan_bags(plan: CalibrationPlan, run_dir: Path) -> dict[str, Path]:
    """{run: bag} of a contact plan's recorded runs. Raises RecordingError: a fitted run without its bag."""
    bags = {e.name: plan.bag_path(e, run_dir) for e in plan.entries}
    missing = [e.name for e in plan.entries if not e.holdout and not bags[e.name].exists()]
    if missing:
        raise RecordingError(f'contact run(s) {missing}: no bag in {run_dir} (record them: a live run)')
    return {name: bag for name, bag in bags.items() if bag.exists()}


class ContactSteps:
    """A contact plan's run on ``node`` (the calibration node: its ``settings``, ``status``, ``bridge`` and
    ``get_logger()``); module doc."""

    def __init__(self, node) -> None:
        self.node = node

    def run(self, plan: CalibrationPlan, run_dir: Path) -> None:
        """Record the pending runs (live), fit, decide, install; ends with ``result.json``. Raises
        ShadowTwinError (a bad input, a run that failed on the robots: its bags so far are kept)."""
        status = self.node.status
        job = contact_job(plan, run_dir)         # its checks before anything moves
        if plan.mode == LIVE:
            self._record(plan, run_dir)
        bags = plan_bags(plan, run_dir)
        status.set('calibrating', f'{len(bags)} contact run(s); {job.describe()}')
        done = job.run(bags, progress=lambda line: status.set('calibrating', line))
        document = report(done.fit, done.accept, done.reason, bags)
        document.update(scene=str(done.scene), figure=str(done.figure))
        summary = {'report': str(done.report), 'scene': str(done.scene),
                   **{k: f'{v:.4g}' for k, v in done.fit.values.items()}}
        if not done.accept:
            document['installed'] = False
            write_result(run_dir, document)
            status.set('refused', done.reason, DiagnosticStatus.WARN, **summary)
            return
        installed, message, failed = False, 'install is false: not installed', False
        if self.node.settings.install:
            status.set('installing', f'reloading {self.node.settings.bridge_node} with the calibrated scene', **summary)
            installed, message = self.node.bridge.install_fitted_scene(done.scene, done.fit.targets, run_dir / JOB_DIR)
            failed = not installed and plan.mode == LIVE      # offline without a bridge: written is the whole job
        document.update(installed=installed, install_message=message)
        write_result(run_dir, document)
        status.set('failed' if failed else 'done', f'{done.reason}; {message}',
                   DiagnosticStatus.ERROR if failed else DiagnosticStatus.OK, **summary)

    def _record(self, plan: CalibrationPlan, run_dir: Path) -> None:
        """The runs whose bag is not there yet, on the robots through the twin (every run planned first)."""
        pending = plan.pending(run_dir)
        if not pending:
            return
        c, protocol = plan.contacts, plan.contact_protocol()
        if protocol.live is None:
            raise ConfigError(f'{Path(c["protocol"]).name}: no live section: the protocol cannot be run on the robots')
        spec = build_cell_spec(CellConfig.from_yaml(c['cell_config']))
        add_objects(spec, SceneConfig.from_yaml(protocol.live.scene))
        settings = ContactRunSettings(self.node.settings.action_name, tuple(c['place_services']), plan_topics(plan),
                                      float(c['start_lead']), tuple(arm_joint_names()))
        runs = {run.name: run for run in (*protocol.runs, *protocol.holdout)}
        (Path(run_dir) / 'bags').mkdir(parents=True, exist_ok=True)
        runner = ContactRunRecorder(self.node, protocol, spec.compile(), settings)
        try:
            for run in runs.values():
                runner.plan(run)                 # a pose the arm cannot take: one error, nothing moved
            for k, entry in enumerate(pending):
                self.node.status.set('recording', f'contact run {entry.name} ({k + 1}/{len(pending)}) on the robots',
                                     trajectory=entry.name)
                counts = runner.record(runs[entry.name], plan.bag_path(entry, run_dir))
                self.node.get_logger().info(f'recorded {entry.name}: ' + ', '.join(f'{t} {n}' for t, n in counts.items()))
        finally:
            runner.close()
