"""``shadow-twin calibrate --protocol``: calibrate the cell (UR5 and MiR250) offline from the bags of its protocol.

    shadow-twin calibrate --protocol [cell | FILE.yaml] --bags DIR --out DIR
                          [--model CELL.xml | --cell-config FILE.yaml] [--gains FILE.yaml]
                          [--cmd-vel-topic T] [--odom-topic T] [--pose-topic T] [--frame FILE.yaml]
                          [--arm-topic T] [--seed N] [--workers N] [--cluster ADDRESS]

The bags are one per protocol run, named after it (``DIR/IN1``, ``DIR/CY``...: what the
calibration node records into ``<run>/bags``). The job is the calibration node's
(:mod:`shadow_twin.calibration.jobs.cell_job`): screening and fit of the arm on its arm
identification runs and of the base on IN1, IN2, CN1; every run scored before and after
(printed as a table); ``report.json``, ``parameters.yaml``, the calibrated MJCF and a PNG per
run in ``--out``. ``--model``: the cell MJCF the sim ran (default: the cell of ``--cell-config``,
written into ``--out``).

Exit status: 0 accepted (the calibrated model is written), 3 refused (a validation run got
worse, or nothing better was found: the model is still written, for inspection), 2 bad input
(one line ``shadow-twin calibrate: error: ...``: a run without a bag, a base run without
odometry or pose topic, a path that never moves, an existing ``--out``...), nothing written.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from shadow_twin.calibration.jobs.cell_job import CellCalibrationJob, CellJobSpec, CellTopics
from shadow_twin.calibration.scoring.reduced import DEFAULT_MODE as DEFAULT_REDUCE, MODES as REDUCE_MODES
from shadow_twin.calibration.jobs.cell_result import result_lines
from shadow_twin.calibration.engine.executor import parse_cluster
from shadow_twin.calibration.jobs.protocol import CellProtocol
from shadow_twin.cli.errors import ErrorLineParser, run_reporting_errors
from shadow_twin.cli.inputs import nonnegative_int
from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.paths import config_path
from shadow_twin.model.cell.assembly import CellConfig, write_cell_mjcf

PROG = 'shadow-twin calibrate'



def build_parser() -> argparse.ArgumentParser:
    """The parser of ``shadow-twin calibrate --protocol``."""
    p = ErrorLineParser(prog=f'{PROG} --protocol', description=__doc__.split('\n\n')[0])
    p.add_argument('--protocol', required=True, metavar='cell|FILE.yaml',
                   help="protocol file; 'cell' = config/calibration/cell_protocol.yaml")
    p.add_argument('--bags', type=Path, required=True, help='folder with one bag per protocol run, named after it')
    p.add_argument('--out', type=Path, required=True, help='output folder (must not exist)')
    p.add_argument('--model', type=Path, help='the cell MJCF the sim ran (default: written from --cell-config)')
    p.add_argument('--cell-config', type=Path, help='cell YAML for the default model (default config/cell.yaml)')
    p.add_argument('--gains', type=Path, default=None, help='controller gains (default config/controllers/cell.yaml)')
    p.add_argument('--cmd-vel-topic', default='/cmd_vel', help='TwistStamped commands of the real base')
    p.add_argument('--odom-topic', default='/odom', help='Odometry of the real base')
    p.add_argument('--pose-topic', default=None, help='motion-capture PoseStamped of the base (instead of odometry)')
    p.add_argument('--frame', type=Path, default=None, help='floor frame of the pose topic (frame-calibration --out)')
    p.add_argument('--arm-topic', default='/joint_states', help='JointState of the real arm')
    p.add_argument('--seed', type=nonnegative_int, default=0, help='random seed, an integer >= 0 (default: 0)')
    p.add_argument('--workers', type=int, default=2, help='simulations in parallel (threads)')
    p.add_argument('--cluster', default='', metavar='ADDRESS',
                   help="where the rollout batches run: '' (these threads), auto, ray://HOST:PORT or HOST:PORT (Ray)")
    p.add_argument('--reduce', choices=REDUCE_MODES, default=DEFAULT_REDUCE,
                   help='auto (the default): each group screened and fitted on the model with the parts its runs '
                        'need not move frozen where each run starts them (the hand for the arm; the arm and the hand '
                        'for the base), when that moves the objective of the model as given by at most 0.5 %% '
                        '(measured, logged); exact, off: on the whole model (freezing is never exact); validation is '
                        'always on the whole model')
    return p


def bags_of(folder: Path, protocol: CellProtocol) -> dict[str, Path]:
    """{run: bag} of ``folder`` (entries named after the runs; a ROS 1 ``RUN.bag`` too).
    Raises ConfigError naming the runs without a bag."""
    if not folder.is_dir():
        raise ConfigError(f'--bags {folder} is not a folder')
    bags, missing = {}, []
    for run in protocol.runs:
        found = [p for p in (folder / run.name, folder / f'{run.name}.bag') if p.exists()]
        if found:
            bags[run.name] = found[0]
        else:
            missing.append(run.name)
    if missing:
        raise ConfigError(f'no bag in {folder} for the protocol run(s) {missing}')
    return bags


def run(args: argparse.Namespace) -> int:
    """Check the inputs, calibrate, print; returns the exit status (see module doc)."""
    protocol = CellProtocol.from_yaml(None if args.protocol == 'cell' else args.protocol)
    bags = bags_of(args.bags, protocol)
    if args.out.exists():
        raise ConfigError(f'--out {args.out} exists; choose a new folder (results are never overwritten)')
    for what, path in (('--model', args.model), ('--gains', args.gains), ('--frame', args.frame)):
        if path is not None and not path.is_file():
            raise ConfigError(f'{what} {path} does not exist')
    gains = args.gains or config_path('controllers', 'cell.yaml')
    topics = CellTopics(args.cmd_vel_topic, None if args.pose_topic else args.odom_topic, args.pose_topic,
                        args.arm_topic)
    scratch = args.out.with_name(args.out.name + '.partial')
    model = args.model
    if model is None:
        cell = CellConfig.from_yaml(args.cell_config) if args.cell_config else None
        model, _ = write_cell_mjcf(cell, scratch / 'cell.xml', force=True)
    parse_cluster(args.cluster)                  # a malformed address: one line before anything runs
    spec = CellJobSpec(protocol, Path(model), Path(gains), bags, topics, args.seed, args.workers, args.frame,
                       cluster=args.cluster, reduce=args.reduce)
    try:
        job = CellCalibrationJob(spec, args.out)        # reads every bag: bad input fails here
    except ShadowTwinError:
        if args.model is None:
            (scratch / 'cell.xml').unlink(missing_ok=True)
            scratch.rmdir()
        raise
    args.out.mkdir(parents=True)
    if args.model is None:
        (scratch / 'cell.xml').rename(args.out / 'cell.xml')
        scratch.rmdir()
    print(f'{PROG}: {len(bags)} runs of {protocol.source}; arm {protocol.arm_space.name}, base '
          f'{protocol.base_space.name}; output {args.out}', flush=True)
    result = job.run(lambda stage, done, total, best: print(f'  {stage}: {done}/{total}', flush=True)
                     if done == total else None)
    print('\n'.join(result_lines(result)))
    print('sensitivity: ' + '; '.join(f'{g}: {", ".join(names)}' for g, names in result.sensitivity.items()))
    print(f'{"accepted" if result.accept else "refused"}: {result.reason}')
    print(f'calibrated model: {result.calibrated_model}; report: {args.out / "report.json"}')
    return ExitCode.OK if result.accept else ExitCode.REFUSED


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0, 3, or 2 after one error line on stderr)."""
    logging.basicConfig(level=logging.INFO, format='[%(levelname)s] %(name)s: %(message)s')
    return run_reporting_errors(PROG, lambda a: run(build_parser().parse_args(a)),
                                sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
