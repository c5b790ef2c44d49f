"""The plan of a calibration run (``plan.yaml`` in its run directory), so that a killed run resumes.

A plan names everything a run needs: the base model and gains the sim ran when
the run began, the search space, objective joints, optimiser and alignment
settings, and its recordings (each: a bag, the trajectory that produced it,
whether it is held out). Live runs record their bags into ``<run>/bags/<name>``;
offline runs point at the user's bags (read only, never written).

The plan is written once, atomically, when a run starts; a resumed run reads it
back, so it continues with the same inputs even if the node's parameters or the
bridge's model changed meanwhile.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import yaml

from shadow_twin.calibration.evaluation import AlignmentSettings
from shadow_twin.calibration.job import RESULT, JobSpec, RecordingSource
from shadow_twin.calibration.run import CalibrationSettings
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.control.trajectory import parse_trajectory_arg

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
    """What a run does (see module doc). Paths are absolute."""

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
        AlignmentSettings(**self.alignment)

    # -- files -------------------------------------------------------------------------------
    def write(self, run_dir: str | Path) -> Path:
        """Write ``plan.yaml`` into ``run_dir`` atomically; returns its path."""
        return write_text_atomic(Path(run_dir) / PLAN, yaml.safe_dump(asdict(self), sort_keys=False))

    @classmethod
    def read(cls, run_dir: str | Path) -> 'CalibrationPlan':
        """Read ``<run_dir>/plan.yaml``. Raises ConfigError if missing or malformed."""
        path = Path(run_dir) / PLAN
        try:
            data = yaml.safe_load(path.read_text())
            data['entries'] = [PlanEntry(**e) for e in data['entries']]
            return cls(**data)
        except FileNotFoundError:
            raise ConfigError(f'{path} does not exist') from None
        except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f'{path}: not a calibration plan ({exc})') from None

    # -- use ---------------------------------------------------------------------------------
    def bag_path(self, entry: PlanEntry, run_dir: str | Path) -> Path:
        bag = Path(entry.bag)
        return bag if bag.is_absolute() else Path(run_dir) / bag

    def pending(self, run_dir: str | Path) -> list[PlanEntry]:
        """Entries whose bag does not exist yet (live runs record them)."""
        return [e for e in self.entries if not self.bag_path(e, run_dir).exists()]

    def job_spec(self, run_dir: str | Path) -> JobSpec:
        """The :class:`JobSpec` of this plan. Raises ConfigError / TrajectoryError for bad entries,
        RecordingError for a missing bag."""
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
                       Path(self.joint_map_file) if self.joint_map_file else None)


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
