"""The ``calibration_node``: calibrate the running twin against the robot, on request.

On ``~/calibrate`` (``std_srvs/srv/Trigger``; also ``shadow-twin calibrate-live``)
the node starts (or resumes) a calibration run in a worker thread and answers at
once with the run directory ("calibration started: DIR"); while a run goes on, every
request is answered at once, unsuccessful, with that run and its progress ("a run is going
on: DIR (phase: message)"): the service never waits for the run, callers follow ``~/status``.
A run:

1. **live** (``bag`` empty): executes each trajectory of ``trajectories`` and
   ``holdout`` through the twin's ``/twin/follow_joint_trajectory`` (robot and
   sim together) with a known start stamp (as far ahead as the twin needs: its
   ``start_lead`` + ``start_lead_per_point`` x points, read from ``twin_node`` when the run
   starts, + ``send_margin``; :mod:`calibration_node.twin_lead`), recording ``/joint_states``,
   ``/sim/joint_states`` and the commanded trajectory (stamped with its start)
   into an MCAP bag per trajectory (``<run>/bags/<name>``);
   **offline** (``bag:=A[,B...]``): uses those bags (ROS 1 or ROS 2) and moves nothing;
2. fits the search space to the fit recordings with the foundation's alignment,
   metrics and optimiser, checkpointing every evaluation, and writes the report;
3. scores the held-out recordings before and after, and refuses the calibration
   if it made them worse (or found nothing better);
4. installs an accepted model: copies it to ``<output_dir>/models/`` under a new
   versioned name, sets the bridge's ``model_path`` to it and calls its
   ``~/reload``; if the reload fails the bridge keeps its model and the parameter
   is set back. Offline with no bridge answering, the model is only written (``done``).

**The contact protocol** (``protocol``: ``contacts`` = ``config/calibration/contact_protocol.yaml``, or a
contact protocol YAML): its runs recorded on the robots (live; the ``contact_*`` parameters), fitted, the
calibrated scene installed as the bridge's ``scene_file`` (:mod:`calibration_node.contact_protocol`).

**The cell** (``protocol``: ``cell`` = ``config/calibration/cell_protocol.yaml``, or a
protocol YAML): a live run executes the protocol's runs in order (IN1, IN2, CN1, CN2, CY, IY,
AR1..AR3 of the MiR250 + UR5 twin study; :mod:`calibration_node.protocol_runner`): the arm to
the rest pose, then one goal of arm and base from the base's newest odometry pose, recording
joint states, the base's velocity commands, both odometries (and a motion-capture pose topic)
into ``<run>/bags/<RUN>``; offline, bags named after the runs are used. Then
:class:`~shadow_twin.calibration.jobs.cell_job.CellCalibrationJob` screens, fits and validates (the
validation runs before and after) and decides; an accepted model is installed as above (the
bridge keeps its gains file).

Progress: log lines, ``~/status`` (``diagnostic_msgs/DiagnosticStatus``, latched,
on every change and each ``status_period``) and the same status on /diagnostics.
A run killed midway resumes on the next ``~/calibrate``, or at start when
``auto_resume`` and its recordings are all there (nothing has to move).

Run: ``calibration_node --ros-args --params-file config/calibration_node.yaml``.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
import traceback
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from calibration_node.bridge_link import BridgeLink
from calibration_node.contact_protocol import ContactSteps, contact_job
from calibration_node.execution import TrajectoryExecutor
from calibration_node.parameters import BASE_TOPICS, SPECS, CalibrationNodeSettings
from calibration_node.plan_setup import PlanSetup
from calibration_node.protocol_runner import OdometryWatch, ProtocolRunner, RunnerSettings
from calibration_node.recorder import BagRecorder
from calibration_node.status import StatusBoard
from calibration_node.twin_lead import StartLead, TwinLeadReader
from shadow_twin.calibration.jobs.cell_job import CellCalibrationJob
from shadow_twin.calibration.jobs.job import CalibrationJob, publish_gains, publish_model
from shadow_twin.calibration.jobs.plan import LIVE, OFFLINE, CalibrationPlan, PlanEntry, new_run_dir, unfinished_runs
from shadow_twin.calibration.recordings.recording import largest_gap, read_joint_states
from shadow_twin.common.errors import ConfigError, GoalRejectedError, RecordingError, ShadowTwinError
from shadow_twin.common.files import versioned_path
from shadow_twin.common.stamps import from_nanoseconds
from shadow_twin.control.trajectory import load_waypoint_yaml
from shadow_twin.ros.calibration_client import going_on_message, started_message
from shadow_twin.ros.guard import guarded_service, guarded_timer
from shadow_twin.ros.parameters import declare
from shadow_twin.ros.spinning import run_node

NODE_NAME = 'calibration_node'


def ros_home() -> Path:
    """``$ROS_HOME`` or ``~/.ros`` (where ROS 2 tools keep their files)."""
    return Path(os.environ.get('ROS_HOME') or Path.home() / '.ros')


class CalibrationNode(PlanSetup, Node):
    """See module doc. Raises ConfigError for invalid parameters at start."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        declare(self, SPECS)
        #: The current parameters, typed (read again after each change).
        self.settings = s = CalibrationNodeSettings.read(self._p)
        self.add_post_set_parameters_callback(self._read_settings)
        self._optimiser_settings()
        protocol = self._protocol_settings()        # validates the protocol parameters
        self.output_dir = Path(s.output_dir or ros_home() / 'shadow_twin' / 'calibration').expanduser()
        self._worker: threading.Thread | None = None
        self._run_dir: Path | None = None            # of the run the worker does
        group = ReentrantCallbackGroup()
        self.status = StatusBoard(self)
        guarded_service(self, Trigger, '~/calibrate', self._on_calibrate,
                        callback_group=MutuallyExclusiveCallbackGroup())
        guarded_timer(self, s.status_period, self.status.publish, 'status')
        self.trajectories = TrajectoryExecutor(self, s.action_name, group)
        self.recorder = BagRecorder(self, {s.real_joint_states_topic: JointState, s.sim_joint_states_topic: JointState})
        self.bridge = BridgeLink(self, s.bridge_node, s.bridge_timeout, group)
        self.twin_lead = TwinLeadReader(self, s.twin_node, s.twin_timeout, group)
        self.contact_steps = ContactSteps(self)
        self._group = group
        self._odometry: dict[str, OdometryWatch] = {}
        if protocol['protocol'] is not None and not s.bag:
            # subscribe now: DDS discovery takes seconds, the first run should not wait for it
            self.recorder.subscribe({topic: BASE_TOPICS[name] for name, topic in protocol['topics'].items() if topic})
            if protocol['topics']['base_odom_topic']:
                self._odometry_watch(protocol['topics']['base_odom_topic'])
        mode = f'offline, bags {s.bag}' if s.bag else 'live'
        if protocol['protocol'] is not None or protocol['contacts'] is not None:
            mode += f', protocol {protocol["protocol"] or protocol["contacts"]}'
        self.get_logger().info(f'ready: ~/calibrate ({mode}); runs in {self.output_dir}')
        if s.auto_resume:
            self._resume_timer = guarded_timer(self, 0.5, self._auto_resume, 'auto resume', callback_group=group)

    def _p(self, name: str):
        return self.get_parameter(name).value

    def _read_settings(self, changed=()) -> None:
        """Read :attr:`settings` again (after ``changed`` parameters were set)."""
        self.settings = CalibrationNodeSettings.read(self._p)

    @property
    def busy(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    # -- requests --------------------------------------------------------------------------------
    def _on_calibrate(self, request, response):
        # answers at once: the run goes on in the worker; a caller follows ~/status
        if self.busy:
            response.success = False
            response.message = going_on_message(self._run_dir, self.status.phase, self.status.message)
            self.get_logger().info(f'~/calibrate: {response.message}')
            return response
        try:
            run_dir, resumed = self._open_run()
        except ShadowTwinError as exc:
            response.success, response.message = False, f'cannot start a calibration: {exc}'
            self.status.set('failed', response.message, DiagnosticStatus.ERROR)
            return response
        self._start(run_dir)
        response.success = True
        response.message = started_message(run_dir, resumed)
        return response

    def _auto_resume(self) -> None:
        self.destroy_timer(self._resume_timer)
        runs = unfinished_runs(self.output_dir)
        if not runs or self.busy:
            return
        run_dir = runs[-1]
        try:
            plan = CalibrationPlan.read(run_dir)
        except ConfigError as exc:
            self.get_logger().warning(f'interrupted run {run_dir} cannot be resumed: {exc}')
            return
        pending = plan.pending(run_dir)
        if pending:
            self.get_logger().info(f'interrupted run {run_dir} still has to record {[e.name for e in pending]}; '
                                   f'call ~/calibrate to continue it')
            return
        self.get_logger().info(f'resuming the interrupted calibration {run_dir}')
        self._start(run_dir)

    def _start(self, run_dir: Path) -> None:
        self._run_dir = run_dir
        self._worker = threading.Thread(target=self._work, args=(run_dir,), name='calibration', daemon=True)
        self._worker.start()

    def _open_run(self) -> tuple[Path, bool]:
        """The latest interrupted run, or a new one with a new plan; (run dir, resumed).
        Raises ShadowTwinError (bad parameters, missing files) before creating anything."""
        runs = unfinished_runs(self.output_dir)
        if runs:
            return runs[-1], True
        fields = self._plan_fields()
        check = CalibrationPlan(run_id='check', **fields)     # validates before anything is written
        if check.contacts is not None:
            contact_job(check, self.output_dir)               # the job's checks too (a name the space lacks)
        run_id, run_dir = new_run_dir(self.output_dir)
        CalibrationPlan(run_id=run_id, **fields).write(run_dir)
        return run_dir, False

    # -- the run ---------------------------------------------------------------------------------
    def _work(self, run_dir: Path) -> None:
        try:
            plan = CalibrationPlan.read(run_dir)
            self.status.set('starting', f'run {plan.run_id} ({plan.mode})', run_dir=str(run_dir))
            if plan.contacts is not None:
                self.contact_steps.run(plan, run_dir)     # records its own runs (calibration_node.contact_protocol)
                return
            if plan.mode == LIVE:
                self._record(plan, run_dir)
            if plan.protocol is not None:
                self._calibrate_cell(plan, run_dir)
            else:
                self._calibrate(plan, run_dir)
        except ShadowTwinError as exc:
            self.status.set('failed', str(exc), DiagnosticStatus.ERROR)
        except Exception as exc:   # keep the node up; the traceback is in the log
            self.get_logger().error(traceback.format_exc())
            self.status.set('failed', f'unexpected error: {exc!r}', DiagnosticStatus.ERROR)

    def _odometry_watch(self, topic: str) -> OdometryWatch:
        """The (one) watch of odometry ``topic``."""
        if topic not in self._odometry:
            self._odometry[topic] = OdometryWatch(self, topic, self._group)
        return self._odometry[topic]

    def _recordings(self, plan: CalibrationPlan, entries: list[PlanEntry], start_lead: StartLead):
        """(entry, what it does (for the status), record(bag) -> (start ns, counts)) of each pending entry:
        a protocol run through :class:`ProtocolRunner`, else a trajectory through the executor; every
        goal is stamped ``start_lead`` ahead."""
        self.recorder.subscribe({plan.real_topic: JointState, plan.sim_topic: JointState})
        if plan.protocol is not None:
            runner = ProtocolRunner(plan, self.trajectories, self.recorder, self._odometry_watch(plan.base_odom_topic),
                                    RunnerSettings(start_lead, self.settings.base_settle_time))
            for entry in entries:
                run = runner.protocol.run(entry.name)
                about = f'{run.role}' + (f', {run.description}' if run.description else '')
                yield entry, (runner.duration(run), about), functools.partial(runner.record, run)
            return
        tail = float(plan.alignment['settle_time']) + float(plan.alignment['stamped_max_delay']) + 0.3
        for entry in entries:
            trajectory = load_waypoint_yaml(*entry.trajectory.rsplit(':', 1))
            yield entry, (trajectory.duration, ''), functools.partial(
                self.trajectories.record, self.recorder, trajectory, start_lead=start_lead, tail=tail,
                topics=[plan.real_topic, plan.sim_topic])

    def _record(self, plan: CalibrationPlan, run_dir: Path) -> None:
        pending = plan.pending(run_dir)
        if not pending:
            return
        attempts = self.settings.record_attempts
        # what the twin needs now (it may have been reconfigured since the last run)
        lead = self.twin_lead.read(self.settings.start_lead, self.settings.send_margin)
        self.get_logger().info(f'start lead of this run\'s goals: {lead.describe()}')
        for k, (entry, (duration, about), record) in enumerate(self._recordings(plan, pending, lead)):
            for attempt in range(1, attempts + 1):
                again = f', attempt {attempt}/{attempts}' if attempt > 1 else ''
                self.status.set('recording', f'executing {entry.name} ({k + 1}/{len(pending)}, '
                                f'{duration:.1f} s{again})' + (f': {about}' if about else ''), trajectory=entry.name)
                bag = plan.bag_path(entry, run_dir)
                try:
                    start_ns, recorded = record(bag=bag)
                except GoalRejectedError as exc:                # nothing moved: send it again
                    if attempt == attempts:
                        raise
                    self.get_logger().warning(f'{exc}; nothing moved, executing {entry.name} again '
                                              f'(attempt {attempt + 1}/{attempts})')
                    continue
                counts = ', '.join(f'{n} on {t}' for t, n in recorded.items())
                self.get_logger().info(f'recorded {entry.name} (start {from_nanoseconds(start_ns):.3f} s): '
                                       f'{counts} -> {bag}')
                problem = self._set_aside_if_gap(bag, (plan.real_topic, plan.sim_topic), run_dir)
                if problem is None:
                    plan.note_attempts(run_dir, entry.name, attempt)
                    break
                if attempt == attempts:
                    raise RecordingError(f'{problem}; {attempts} attempt(s) failed (record_attempts); '
                                         'call ~/calibrate again to record it anew')
                self.get_logger().warning(f'{problem}; recording {entry.name} again '
                                          f'(attempt {attempt + 1}/{attempts})')

    def _set_aside_if_gap(self, bag: Path, topics, run_dir: Path) -> str | None:
        """If a topic of ``bag`` has a gap longer than ``max_gap`` s, move the bag to ``bags/rejected/``
        (kept for inspection, never overwritten) and return what was wrong; else None."""
        limit = self.settings.max_gap
        for topic in topics:
            gap, at = largest_gap(read_joint_states(bag, topic))
            if gap > limit:
                rejected = versioned_path(run_dir / 'bags' / 'rejected' / bag.name)
                rejected.parent.mkdir(parents=True, exist_ok=True)
                bag.rename(rejected)
                return (f'{topic} in the recording of {bag.name} has a {gap:.3f} s gap at {at:.3f} s '
                        f'(max_gap {limit:g} s): messages were lost; moved it to {rejected}')
        return None

    def _calibrate(self, plan: CalibrationPlan, run_dir: Path) -> None:
        self.status.set('preparing', f'aligning {len(plan.entries)} recording(s)')
        job = CalibrationJob(plan.job_spec(run_dir), run_dir)
        budget = plan.settings['budget']
        simulated = job.search().short()        # what the search simulates (issue 39), in every status

        step = max(1, budget // 10)
        logged = {'best': None, 'done': 0}

        def progress(done, total, best):
            # status on every batch; a log line when the best improves or every tenth of the budget
            log = best != logged['best'] or done // step > logged['done'] // step or done == total
            if log:
                logged.update(best=best, done=done)
            self.status.set('calibrating', f'{done}/{total} evaluations, best objective {best:.6g} rad^2',
                            log=log, evaluations=done, budget=total, best_objective=f'{best:.6g}',
                            search_model=simulated)
        self.status.set('calibrating', f'0/{budget} evaluations ({plan.settings["optimizer"]}, '
                        f'{len(job.space.dimensions)} parameters, {simulated})', evaluations=0, budget=budget,
                        search_model=simulated)
        result = job.run(progress)
        document = result.to_dict()
        summary = dict(fit_before=f'{result.fit_before:.6g}', fit_after=f'{result.fit_after:.6g}',
                       report=str(run_dir / 'report.json'))
        for name, v in result.holdout.items():
            summary[f'holdout_{name}'] = f'{v["before"]:.6g} -> {v["after"]:.6g}'
        gains = None
        if result.accept:
            gains = publish_gains(run_dir / 'parameters.yaml', self.output_dir / 'models', Path(plan.model_path),
                                  plan.run_id)
        self._finish(plan, job, result, document, summary, gains)

    def _calibrate_cell(self, plan: CalibrationPlan, run_dir: Path) -> None:
        """Screen, fit and validate the protocol's recordings (CellCalibrationJob), then finish as
        :meth:`_finish` (the job writes no gains: the bridge keeps its gains file)."""
        self.status.set('preparing', f'reading {len(plan.entries)} protocol run(s) of {Path(plan.protocol).name}')
        job = CellCalibrationJob(plan.cell_job_spec(run_dir), run_dir)
        logged = {'stage': None, 'best': None, 'done': 0}

        def progress(stage: str, done: int, total: int, best: float) -> None:
            # status on every call; a log line on a new stage, a better best, each tenth of a stage, its end
            # (best is NaN while screening and validating: no objective is minimised there)
            best = None if math.isnan(best) else float(best)
            step = max(1, total // 10)
            log = (stage != logged['stage'] or best != logged['best'] or done // step > logged['done'] // step
                   or done == total)
            if log:
                logged.update(stage=stage, best=best, done=done)
            found = '' if best is None else f', best objective {best:.6g}'
            self.status.set('calibrating', f'{stage}: {done}/{total}{found}', log=log, stage=stage, evaluations=done,
                            budget=total, best_objective='-' if best is None else f'{best:.6g}')
        self.status.set('calibrating', f'protocol {Path(plan.protocol).name}: {len(plan.entries)} runs')
        result = job.run(progress)
        document = result.to_dict()
        summary = {f'validation_{name}': f'{v["before"]:.6g} -> {v["after"]:.6g}'
                   for name, v in result.validation.items()}
        summary['report'] = str(run_dir / 'report.json')
        self._finish(plan, job, result, document, summary, None)

    def _finish(self, plan: CalibrationPlan, job, result, document: dict, summary: dict,
                gains: Path | None) -> None:
        """Write the result; a refused calibration ends 'refused'; an accepted one is copied to
        ``models/`` under a new name and, with ``install``, installed into the bridge (``gains``: a
        new gains file to install with it, or None to keep the bridge's)."""
        if not result.accept:
            document['installed'] = False
            job.write_result(document)
            self.status.set('refused', result.reason, DiagnosticStatus.WARN, **summary)
            return
        models = self.output_dir / 'models'
        model = publish_model(result.calibrated_model, models, Path(plan.model_path), plan.run_id)
        document.update(model=str(model), gains_file=str(gains) if gains else None)
        installed, message, failed = False, 'install is false: not installed', False
        install = self.settings.install
        if install and plan.mode == OFFLINE and self.bridge.model_and_gains() is None:
            # offline without a running twin: writing the model is the whole job
            message = f'not installed: no bridge {self.bridge.bridge} answered (offline); written to {model}'
        elif install:
            self.status.set('installing', f'reloading {self.settings.bridge_node} with {model.name}', **summary)
            installed, message = self.bridge.install(str(model), str(gains) if gains else None)
            failed = not installed
        document.update(installed=installed, install_message=message)
        job.write_result(document)
        level = DiagnosticStatus.ERROR if failed else DiagnosticStatus.OK
        phase = 'failed' if failed else 'done'
        self.status.set(phase, f'{result.reason}; {message}', level, model=str(model), **summary)

    def destroy_node(self) -> None:
        self.recorder.destroy()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Console entry point ``calibration_node``; returns the exit status."""
    return run_node(CalibrationNode, NODE_NAME, lambda: MultiThreadedExecutor(num_threads=4), args)


if __name__ == '__main__':
    sys.exit(main())
