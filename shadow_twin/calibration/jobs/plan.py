"""The plan of a calibration run (``plan.yaml`` in its run directory), so that a killed run resumes.

A plan names everything a run needs: the base model and gains the sim ran when
the run began, the search space, objective joints, optimiser and alignment
settings, and its recordings (each: a bag, the trajectory that produced it,
whether it is held out). Live runs record their bags into ``<run>/bags/<name>``;
offline runs point at the user's bags (read only, never written).

A plan of the cell's calibration protocol (``protocol``: the absolute path of a protocol YAML,
:class:`~shadow_twin.calibration.jobs.protocol.CellProtocol`) has one entry per protocol run, in the
protocol's order (name = the run's name, held out = a validation run), the base's topics
(velocity commands, odometry, an optional motion-capture pose topic and its floor frame file),
and is calibrated by :class:`~shadow_twin.calibration.jobs.cell_job.CellCalibrationJob`
(:meth:`CalibrationPlan.cell_job_spec`); its ``space_file`` is empty (the protocol names the
search spaces of the arm and the base).

A plan of the contact protocol (``contacts``, :class:`~shadow_twin.calibration.contacts.protocol.ContactProtocol`)
has one entry per run (the fitted runs, then the held-out ones) and is calibrated by
:class:`~shadow_twin.calibration.jobs.contact_job.ContactCalibrationJob`.

The plan is written once, atomically, when a run starts; a resumed run reads it
back, so it continues with the same inputs even if the node's parameters or the
bridge's model changed meanwhile.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import yaml

from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.calibration.jobs.cell_job import CellJobSpec, CellTopics
from shadow_twin.calibration.scoring.placement import AlignmentSettings
from shadow_twin.calibration.engine.executor import parse_cluster
from shadow_twin.calibration.scoring.reduced import DEFAULT_MODE as DEFAULT_REDUCE, MODES as REDUCE_MODES
from shadow_twin.calibration.jobs.job import RESULT, JobSpec, RecordingSource
from shadow_twin.calibration.jobs.protocol import VALIDATION, CellProtocol
from shadow_twin.calibration.engine.run import CalibrationSettings
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.common.state_files import check_finite, load_yaml, read_state
from shadow_twin.control.trajectory import parse_trajectory_arg

#: File of a run directory: how many sends each recording took, ``{name: attempts}``.
ATTEMPTS = 'recording_attempts.json'

PLAN = 'plan.yaml'
LIVE, OFFLINE = 'live', 'offline'


@dataclass
class PlanEntry:
    """One recording of a plan.

    Attributes:
        name: label (live: the trajectory's name; offline: the bag's name).
        bag: the bag, absolute or relative to the run directory.
        trajectory: ``FILE.yaml:NAME`` of the commanded trajectory, or None when the bag holds it.
        holdout: only scored, not fitted.
    """

    name: str
    bag: str
    trajectory: str | None = None
    holdout: bool = False


@dataclass
class CalibrationPlan:
    """What a run does (see module doc). Paths are absolute.

    The protocol fields (None / defaults for a hand calibration):

    Attributes:
        protocol: absolute path of the protocol YAML, or None.
        base_cmd_vel_topic: the real base's velocity commands (geometry_msgs/TwistStamped).
        base_odom_topic: the real base's odometry (nav_msgs/Odometry); live runs start each base
            path from its newest pose.
        base_pose_topic: a motion-capture geometry_msgs/PoseStamped of the base, or None (when
            set, the calibration compares it instead of the odometry).
        sim_odom_topic: the sim base's odometry (recorded beside the real one).
        frame_file: the floor frame calibration of the pose topic (``shadow-twin
            frame-calibration --out``), or None.
        contacts: a contact protocol's plan (entries: its runs, the fitted then the held-out ones), or None:
            ``protocol`` (its YAML, absolute), ``topics`` (joint states, object pose, palm pose, wrench prefix;
            '' = the default), ``place_services``, ``cell_config`` (the cell the runs are made on, absolute),
            ``fit`` (names; [] = the protocol's), ``start_lead`` (s); ``space_file`` is the contact space and
            ``model_path`` the hand's MJCF ('' = the built-in hand).
    """

    run_id: str
    mode: str
    model_path: str
    gains_file: str
    space_file: str
    objective_joints: list[str]
    settings: dict
    alignment: dict
    entries: list[PlanEntry]
    real_topic: str = '/joint_states'
    sim_topic: str = '/sim/joint_states'
    joint_map_file: str | None = None
    protocol: str | None = None
    base_cmd_vel_topic: str = '/cmd_vel'
    base_odom_topic: str | None = '/odom'
    base_pose_topic: str | None = None
    sim_odom_topic: str = '/sim/odom'
    frame_file: str | None = None
    cluster: str = ''
    contacts: dict | None = None
    #: What the search simulates (:mod:`~shadow_twin.calibration.scoring.reduced`: auto, exact, off).
    reduce: str = DEFAULT_REDUCE
    created: str = field(default_factory=lambda: time.strftime('%Y-%m-%dT%H:%M:%S%z'))

    def __post_init__(self) -> None:
        if self.mode not in (LIVE, OFFLINE):
            raise ConfigError(f'plan mode must be {LIVE!r} or {OFFLINE!r}, got {self.mode!r}')
        if not any(not e.holdout for e in self.entries):
            raise ConfigError('a calibration needs at least one recording that is not held out')
        names = [e.name for e in self.entries]
        if len(set(names)) != len(names):
            raise ConfigError(f'recording names must be unique, got {names}')
        CalibrationSettings(**self.settings)     # validates
        parse_cluster(self.cluster)
        if self.reduce not in REDUCE_MODES:
            raise ConfigError(f'reduce {self.reduce!r}: expected one of {", ".join(REDUCE_MODES)}')
        AlignmentSettings(**self.alignment)
        if self.protocol is not None:
            self._check_protocol()
        if self.contacts is not None:
            self._check_contacts()

    def _check_protocol(self) -> None:
        """A protocol plan: the protocol reads, each of its runs is one entry (in order, held out =
        validation), the base topics are usable. Raises ConfigError naming the problem."""
        protocol = self.cell_protocol()
        runs = [r.name for r in protocol.runs]
        if [e.name for e in self.entries] != runs:
            raise ConfigError(f'the plan\'s recordings {[e.name for e in self.entries]} are not the runs of '
                              f'protocol {self.protocol}: {runs}')
        wrong = [e.name for e, r in zip(self.entries, protocol.runs) if e.holdout != (r.role == VALIDATION)]
        if wrong:
            raise ConfigError(f'recordings {wrong}: held out must be exactly the validation runs')
        if not self.base_cmd_vel_topic:
            raise ConfigError('a protocol plan needs the base\'s velocity command topic (base_cmd_vel_topic)')
        if self.mode == LIVE and not self.base_odom_topic:
            raise ConfigError('a live protocol run needs the base\'s odometry topic (base_odom_topic): each base '
                              'path starts from its newest pose')
        if not self.base_odom_topic and not self.base_pose_topic:
            raise ConfigError('a protocol plan needs the base\'s odometry topic or a pose topic')
        if self.frame_file is not None:
            if not self.base_pose_topic:
                raise ConfigError(f'frame_file {self.frame_file} is set but there is no pose topic: the floor '
                                  'frame applies only to a motion-capture pose topic')
            if not Path(self.frame_file).is_file():
                raise ConfigError(f'frame_file {self.frame_file} does not exist')

    def _check_contacts(self) -> None:
        """A contact plan: its protocol reads, its entries are the protocol's runs (the fitted ones, then the
        held-out ones, held out). Raises ConfigError naming the problem."""
        protocol = self.contact_protocol()
        expected = [(r.name, False) for r in protocol.runs] + [(r.name, True) for r in protocol.holdout]
        if [(e.name, e.holdout) for e in self.entries] != expected:
            raise ConfigError(f'the plan\'s recordings {[e.name for e in self.entries]} are not the runs of contact '
                              f'protocol {self.contacts["protocol"]}: {[name for name, _ in expected]}')

    def contact_protocol(self) -> ContactProtocol:
        """The contact protocol of a contact plan (``contacts['protocol']``, its ``scene`` replaced by
        ``contacts['scene']`` when given). Raises ConfigError (not a contact plan, or a protocol that does not read)."""
        if self.contacts is None:
            raise ConfigError(f'plan {self.run_id} is not a contact protocol run')
        protocol = ContactProtocol.from_yaml(self.contacts['protocol'])
        scene = self.contacts.get('scene')
        return replace(protocol, scene=Path(scene)) if scene else protocol

    # -- files -------------------------------------------------------------------------------
    def write(self, run_dir: str | Path) -> Path:
        """Write ``plan.yaml`` into ``run_dir`` atomically; returns its path."""
        return write_text_atomic(Path(run_dir) / PLAN, yaml.safe_dump(asdict(self), sort_keys=False))

    @classmethod
    def read(cls, run_dir: str | Path) -> 'CalibrationPlan':
        """Read ``<run_dir>/plan.yaml``. Raises ConfigError if missing or not a plan (malformed,
        random bytes, nested too deeply, too large, NaN, a directory, unreadable): that one is moved
        aside to ``plan.yaml.corrupt-<UTC time>`` (:func:`shadow_twin.common.state_files.read_state`),
        so that the run is no longer an unfinished one and the next calibration starts a new run."""
        path = Path(run_dir) / PLAN

        def parse(text: str) -> 'CalibrationPlan':
            data = load_yaml(text)
            if not isinstance(data, dict):
                raise ValueError('not a mapping')
            check_finite(data)
            data['entries'] = [PlanEntry(**e) for e in data['entries']]
            return cls(**data)
        problems: list[str] = []
        plan = read_state(path, parse, 'not a calibration plan:', problems.append,
                          fresh='the next calibration starts a new run')
        if plan is None:
            raise ConfigError(problems[0] if problems else f'{path} does not exist')
        return plan

    # -- use ---------------------------------------------------------------------------------
    def bag_path(self, entry: PlanEntry, run_dir: str | Path) -> Path:
        bag = Path(entry.bag)
        return bag if bag.is_absolute() else Path(run_dir) / bag

    @staticmethod
    def note_attempts(run_dir: str | Path, name: str, attempts: int) -> None:
        """Record that recording ``name`` took ``attempts`` sends (a rejected goal or a gap sends it
        again) in ``run_dir``/:data:`ATTEMPTS` (``{name: attempts}``, written atomically; kept over a
        resumed run)."""
        path = Path(run_dir) / ATTEMPTS
        try:
            known = json.loads(path.read_text())
            known = known if isinstance(known, dict) else {}
        except (OSError, ValueError, RecursionError):      # none yet, or unreadable: counted anew
            known = {}
        known[name] = int(attempts)
        write_text_atomic(path, json.dumps(known, indent=1) + '\n')

    def pending(self, run_dir: str | Path) -> list[PlanEntry]:
        """Entries whose bag does not exist yet (live runs record them)."""
        return [e for e in self.entries if not self.bag_path(e, run_dir).exists()]

    def job_spec(self, run_dir: str | Path) -> JobSpec:
        """The :class:`JobSpec` of this plan. Raises ConfigError / TrajectoryError for bad entries,
        RecordingError for a missing bag."""
        if self.protocol is not None:
            raise ConfigError(f'plan {self.run_id} runs protocol {self.protocol}: use cell_job_spec()')
        sources = {True: [], False: []}
        for entry in self.entries:
            trajectory = parse_trajectory_arg(entry.trajectory) if entry.trajectory else None
            bag = self.bag_path(entry, run_dir)
            if not bag.exists():
                raise RecordingError(f'recording {entry.name!r}: bag {bag} does not exist')
            sources[entry.holdout].append(RecordingSource(entry.name, bag, trajectory, None, self.real_topic,
                                                          self.sim_topic))
        return JobSpec(Path(self.model_path), Path(self.gains_file), Path(self.space_file),
                       list(self.objective_joints), sources[False], sources[True],
                       CalibrationSettings(**self.settings), AlignmentSettings(**self.alignment),
                       Path(self.joint_map_file) if self.joint_map_file else None, self.cluster, self.reduce)


    def cell_protocol(self) -> CellProtocol:
        """The protocol of a protocol plan (read from ``protocol``). Raises ConfigError (no protocol,
        or one that does not read)."""
        if self.protocol is None:
            raise ConfigError(f'plan {self.run_id} is not a protocol run')
        return CellProtocol.from_yaml(self.protocol)

    def base_recording_topics(self) -> dict[str, str]:
        """{role: topic} of the base topics a protocol run records: ``cmd_vel``, ``odom``,
        ``sim_odom`` and ``pose`` (those that are set)."""
        topics = {'cmd_vel': self.base_cmd_vel_topic, 'odom': self.base_odom_topic, 'sim_odom': self.sim_odom_topic,
                  'pose': self.base_pose_topic}
        return {role: topic for role, topic in topics.items() if topic}

    def cell_job_spec(self, run_dir: str | Path) -> CellJobSpec:
        """The :class:`~shadow_twin.calibration.jobs.cell_job.CellJobSpec` of a protocol plan: its protocol,
        model, gains, the bag of every run, the base and arm topics, seed and workers.

        Raises ConfigError (not a protocol plan, or its protocol does not read), RecordingError
        for a run whose bag does not exist."""
        protocol = self.cell_protocol()
        bags = {}
        for entry in self.entries:
            bag = self.bag_path(entry, run_dir)
            if not bag.exists():
                raise RecordingError(f'protocol run {entry.name!r}: bag {bag} does not exist')
            bags[entry.name] = bag
        topics = CellTopics(cmd_vel=self.base_cmd_vel_topic, odom=self.base_odom_topic or None,
                            pose=self.base_pose_topic or None, arm=self.real_topic)
        return CellJobSpec(protocol=protocol, model_path=Path(self.model_path), gains_file=Path(self.gains_file),
                           bags=bags, topics=topics, seed=int(self.settings['seed']),
                           workers=int(self.settings['workers']),
                           frame_file=Path(self.frame_file) if self.frame_file else None, cluster=self.cluster,
                           reduce=self.reduce)


def protocol_entries(protocol: CellProtocol, bags: Sequence[str | Path] | None = None) -> list[PlanEntry]:
    """The plan entries of ``protocol``: one per run, in the protocol's order; a validation run
    is held out; every run needs a bag (:func:`run_entries`).

    Raises:
        ConfigError: as :func:`run_entries`.
    """
    return run_entries([(r.name, r.role == VALIDATION, True) for r in protocol.runs], bags)


def run_entries(runs: Sequence[tuple[str, bool, bool]], bags: Sequence[str | Path] | None = None) -> list[PlanEntry]:
    """The plan entries of a protocol's ``runs`` ((name, held out, needs a bag) each), in their order.

    Args:
        runs: the protocol's runs; one that does not need a bag (a contact hold-out) and has none names
            ``bags/<RUN>``, which does not exist: it is not checked.
        bags: None for a live run (each run records ``bags/<RUN>`` in the run directory); else
            the bags of an offline run, matched to the runs by name (a bag's file or directory
            name up to its first dot: ``.../IN1``, ``IN1.bag`` and ``IN1.mcap`` are run IN1).
    Raises:
        ConfigError: a run that needs a bag without one (naming it), two bags for one run, or a bag that
            names no run of the protocol.
    """
    names = [name for name, _, _ in runs]
    if bags is None:
        return [PlanEntry(name, f'bags/{name}', None, held) for name, held, _ in runs]
    by_run: dict[str, Path] = {}
    for bag in bags:
        name = Path(bag).name.split('.')[0]
        if name in by_run:
            raise ConfigError(f'bags {by_run[name]} and {bag} are both named for protocol run {name}')
        by_run[name] = Path(bag)
    unknown = [str(b) for n, b in by_run.items() if n not in names]
    if unknown:
        raise ConfigError(f'bag(s) {unknown} name no run of the protocol (a bag is matched to a run by its name '
                          f'without extension); runs: {names}')
    missing = [name for name, _, needed in runs if needed and name not in by_run]
    if missing:
        raise ConfigError(f'protocol run(s) {missing} have no bag (a bag is matched to a run by its name without '
                          f'extension, e.g. {missing[0]}/ or {missing[0]}.bag); bags: {[str(b) for b in bags]}')
    return [PlanEntry(name, str(by_run[name].resolve()) if name in by_run else f'bags/{name}', None, held)
            for name, held, _ in runs]


def holdout_names(names: Sequence[str], holdout: str) -> list[str]:
    """Which of ``names`` are held out, from the ``holdout`` parameter.

    ``'auto'``: the last one when there are at least two, else none; ``''``: none;
    otherwise comma-separated names. Raises ConfigError for an unknown name or when
    every recording would be held out.
    """
    holdout = holdout.strip()
    if holdout == 'auto':
        chosen = [names[-1]] if len(names) >= 2 else []
    else:
        chosen = [n.strip() for n in holdout.split(',') if n.strip()]
        unknown = [n for n in chosen if n not in names]
        if unknown:
            raise ConfigError(f'holdout names {unknown} are not among the recordings {list(names)}')
    if names and len(set(chosen)) >= len(names):
        raise ConfigError(f'every recording is held out ({chosen}); at least one must be fitted')
    return chosen


def new_run_dir(output_dir: str | Path) -> tuple[str, Path]:
    """A new run id (``YYYYmmdd-HHMMSS``, suffixed if taken) and its directory (created)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    base = time.strftime('%Y%m%d-%H%M%S')
    run_id, k = base, 1
    while (output_dir / run_id).exists():
        run_id, k = f'{base}-{k}', k + 1
    (output_dir / run_id).mkdir()
    return run_id, output_dir / run_id


def unfinished_runs(output_dir: str | Path) -> list[Path]:
    """Run directories under ``output_dir`` with a plan but no result, oldest first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    return sorted(p for p in output_dir.iterdir()
                  if p.is_dir() and (p / PLAN).exists() and not (p / RESULT).exists())
