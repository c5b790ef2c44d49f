"""``shadow-twin plot``: PNGs of real vs simulated joint positions from a bag, and the RMS
sim - real error per joint (rad); with ``--video PATH``, a video of the bag instead: the real motion as a
ghost against the sim's (:mod:`shadow_twin.visual.video`). Exit status 0, or 2 with one line for bad input.

``--out`` may hold only what earlier plots wrote there (listed in :data:`MANIFEST`) unless
``--force``: a user's own ``overview.png`` is never replaced silently; nor is an existing video."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from shadow_twin.calibration.engine.report import replay_motions
from shadow_twin.calibration.recordings.bag_comparison import MOVING_RANGE, REAL_TOPIC, SIM_TOPIC, compare_bag
from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.cli.errors import run_reporting_errors
from shadow_twin.cli.inputs import OneLineParser, add_input_arguments, bounded_float, load_setup
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import write_text_atomic
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.plots.bag_plots import BagComparison, check_out_dir, default_out_dir, write_plots
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.video import Motion, VideoSettings, render_video
from shadow_twin.visual.video_render import DEFAULT_AZIMUTH, DEFAULT_ELEVATION, CameraView
from shadow_twin.visual.video_writer import check_video_path


#: File in ``--out`` naming the files plots wrote there, one per line.
MANIFEST = 'shadow-twin-plots.txt'
#: The video's defaults: frame rate (frames/s), size (px), the error coloured red (mm).
DEFAULT_FPS, DEFAULT_SIZE, DEFAULT_ERROR_MM = 25.0, '640x480', 20.0


def build_parser() -> OneLineParser:
    """Argument parser of ``shadow-twin plot``."""
    parser = OneLineParser(
        prog='shadow-twin plot',
        description='Plot real vs simulated joint positions of a bag as PNGs (one per joint and an overview), '
                    'and print the RMS sim - real error per joint (rad); or, with --video, draw the bag as a video.')
    parser.add_argument('--bag', type=Path, required=True,
                        help='recording: ROS 1 .bag or ROS 2 bag (directory, .mcap or .db3)')
    parser.add_argument('--out', type=Path,
                        help='output directory (default: <bag name>_plots in the current directory)')
    parser.add_argument('--force', action='store_true',
                        help='write into an --out that holds files no plot wrote (same-named ones are replaced)')
    parser.add_argument('--real-topic', help=f'real JointState topic (default: {REAL_TOPIC})')
    parser.add_argument('--sim-topic', help=f'simulated JointState topic (default: {SIM_TOPIC})')
    parser.add_argument('--joints', metavar='GLOB,GLOB',
                        help="joints to plot, comma-separated fnmatch globs, e.g. 'rh_FF*,rh_THJ4' "
                             '(default: every joint that moves)')
    parser.add_argument('--all-joints', action='store_true',
                        help=f'also plot joints that do not move (position range <= {MOVING_RANGE} rad)')
    video = parser.add_argument_group(
        'video', 'with --video, a video instead of the PNGs: the real motion drawn as a translucent ghost (each '
                 'link coloured by its sim-real error) against the sim drawn solid, with the time stamp, the '
                 "links' errors (mm) and a colour legend. The sim's motion is the bag's sim stream (s from the "
                 'first real sample) or, with --trajectory, the real stream replayed in the sim as calibrate '
                 'and evaluate replay it (s from the trajectory start)')
    video.add_argument('--video', type=Path, metavar='PATH',
                       help='write the video here: .mp4 (H.264) or .gif; an existing file only with --force')
    video.add_argument('--trajectory', metavar='FILE.yaml:NAME',
                       help='replay the real stream in the sim under this commanded trajectory (needed for a bag '
                            'without a sim stream; default: the bag\'s sim stream)')
    video.add_argument('--model', type=Path,
                       help='MJCF drawn (and replayed with --trajectory); default: the built-in Shadow Hand E')
    video.add_argument('--fps', type=bounded_float(0.0, inclusive=False, high=120.0),
                       help=f'frames per second, the motion shown in real time (default: {DEFAULT_FPS:g})')
    video.add_argument('--size', metavar='WxH',
                       help=f'frame size in px, even numbers for MP4 (default: {DEFAULT_SIZE})')
    video.add_argument('--start', type=float, metavar='S',
                       help='s on the video\'s clock where it begins (default: the first sample)')
    video.add_argument('--seconds', type=bounded_float(0.0, inclusive=False), metavar='S',
                       help='how long the video lasts, s (default: to the end)')
    video.add_argument('--camera', metavar='AZ,EL[,DIST]|NAME',
                       help='a free camera at azimuth and elevation (deg) and distance (m) around the moving '
                            f'links, or a camera of the model by name (default: {DEFAULT_AZIMUTH:g},'
                            f'{DEFAULT_ELEVATION:g}, fitted to the links; a negative azimuth: --camera=-30,-15)')
    video.add_argument('--error-scale', type=bounded_float(0.0, inclusive=False), metavar='MM',
                       help=f'link error coloured red, mm (green at 0, yellow at half; default: {DEFAULT_ERROR_MM:g})')
    return parser


def plotted_files(out_dir: Path) -> set[str]:
    """Names of the files earlier plots wrote into ``out_dir`` (its :data:`MANIFEST`; empty if none)."""
    try:
        return set((out_dir / MANIFEST).read_text(encoding='utf-8').split('\n')) - {''}
    except (OSError, UnicodeDecodeError):
        return set()


def check_own_files(out_dir: Path, force: bool) -> None:
    """ConfigError when ``out_dir`` holds files that no plot wrote (unless ``force``)."""
    if force or not out_dir.is_dir():
        return
    ours = plotted_files(out_dir) | {MANIFEST}
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in ours)
    if foreign:
        raise ConfigError(f'--out {out_dir} holds files no plot wrote ({", ".join(foreign[:3])}'
                          f'{", ..." if len(foreign) > 3 else ""}); choose another directory or pass --force '
                          f'to write into it')


def format_table(cmp: BagComparison) -> list[str]:
    """Lines of the per-joint table: RMS and max |sim - real| (rad), or the range of a single stream."""
    width = max([len('joint'), *(len(t.joint) for t in cmp.traces)])
    if not cmp.paired:
        lines = [f'{"joint":<{width}}  {"range (rad)":>12}']
        return lines + [f'{t.joint:<{width}}  {t.range:12.6f}' for t in cmp.traces]
    lines = [f'{"joint":<{width}}  {"RMS sim-real (rad)":>18}  {"max |sim-real| (rad)":>20}  {"samples":>7}']
    for t in cmp.traces:
        if t.err.size:
            lines.append(f'{t.joint:<{width}}  {t.rms:18.6f}  {t.max_abs:20.6f}  {t.err.size:7d}')
        else:
            only = 'real' if t.real_t.size else 'sim'
            lines.append(f'{t.joint:<{width}}  {"n/a (only in " + only + ")":>18}')
    return lines


def parse_size(text: str) -> tuple[int, int]:
    """``WxH`` -> (width, height) px, each 16 to 4096. Raises ConfigError."""
    try:
        width, height = (int(part) for part in text.lower().split('x'))
    except ValueError:
        raise ConfigError(f'--size {text!r}: expected WxH in px, e.g. 640x480') from None
    if not (16 <= width <= 4096 and 16 <= height <= 4096):
        raise ConfigError(f'--size {text!r}: width and height must be 16 to 4096 px')
    return width, height


def bag_motion(cmp: BagComparison) -> Motion:
    """The real and the sim streams of a paired comparison (every joint: ``compare_bag(..., moving_only=False)``)
    on one time axis: steps of the real stream's median interval (s from its first sample) over the span both
    streams cover; each joint linearly interpolated, NaN outside its own samples. Raises ConfigError for a
    comparison without both streams or without a common span."""
    if not cmp.paired:
        raise ConfigError(f'{cmp.bag}: one JointState stream ({cmp.real_topic or cmp.sim_topic}) and no sim '
                          f'stream; give --trajectory FILE.yaml:NAME to replay it in the sim')
    both = [t for t in cmp.traces if t.real_t.size > 1 and t.sim_t.size > 1]
    if not both:
        raise ConfigError(f'{cmp.bag}: no joint is in both {cmp.real_topic} and {cmp.sim_topic}')
    first = max(max(t.real_t[0], t.sim_t[0]) for t in both)
    last = min(max(t.real_t[-1] for t in both), max(t.sim_t[-1] for t in both))
    step = float(np.median(np.concatenate([np.diff(t.real_t) for t in both])))
    if not last - first > step:
        raise ConfigError(f'{cmp.bag}: {cmp.real_topic} and {cmp.sim_topic} share no span of time')
    times = first + np.arange(int((last - first) / step) + 1) * step
    real = np.stack([np.interp(times, t.real_t, t.real_q, left=np.nan, right=np.nan) for t in both], axis=1)
    sim = np.stack([np.interp(times, t.sim_t, t.sim_q, left=np.nan, right=np.nan) for t in both], axis=1)
    return Motion(times, [t.joint for t in both], real, sim)


def replay_motion(bag: Path, trajectory: str, model: Path | None, topic: str | None) -> tuple[Motion, TwinModel, object]:
    """The real stream of ``bag`` against its replay in the sim under ``trajectory`` (``FILE.yaml:NAME``), placed
    and simulated as ``evaluate`` does (:func:`~shadow_twin.cli.inputs.load_setup`, its default alignment, every
    joint of the trajectory): (Motion on the evaluator's time base, s from the trajectory start; the model;
    its joint map). Raises ShadowTwinError (one line) for bad input or a replay that went unstable."""
    parser = OneLineParser(prog='shadow-twin plot')
    add_input_arguments(parser)
    argv = ['--bag', str(bag), '--trajectory', trajectory, '--joints', '*']
    argv += (['--model', str(model)] if model else []) + (['--topic', topic] if topic else [])
    setup = load_setup(parser.parse_args(argv))
    return replay_motions(setup.evaluator, [{}])[0], setup.twin, setup.controller.joint_map


def check_video_target(path: Path, bag: Path, force: bool) -> None:
    """ConfigError: ``path`` is the bag or inside it, or exists (unless ``force``)."""
    check_out_dir(path.parent if str(path.parent) else Path('.'), bag)
    if path.resolve() == Path(bag).resolve():
        raise ConfigError(f'--video {path} is the bag itself')
    if path.exists() and not force:
        raise ConfigError(f'--video {path} exists; choose another path or pass --force to replace it')


#: What --video takes from the PNGs' options: none of these.
_PNG_ONLY = (('out', '--out'), ('joints', '--joints'), ('all_joints', '--all-joints'))
_VIDEO_ONLY = (('trajectory', '--trajectory'), ('model', '--model'), ('fps', '--fps'), ('size', '--size'),
               ('start', '--start'), ('seconds', '--seconds'), ('camera', '--camera'), ('error_scale', '--error-scale'))


def run_video(args) -> int:
    """``plot --video``: check every input, then draw and write the video; prints what it wrote."""
    for name, flag in _PNG_ONLY:
        if getattr(args, name):
            raise ConfigError(f'{flag} is for the PNGs; --video writes one video of every joint')
    width, height = parse_size(args.size or DEFAULT_SIZE)
    fps = args.fps or DEFAULT_FPS
    path = check_video_path(args.video, width, height, fps)
    check_video_target(path, args.bag, args.force)
    scale = ErrorScale(full_scale=(args.error_scale or DEFAULT_ERROR_MM) / 1e3)
    settings = VideoSettings(fps, width, height, args.start, args.seconds, CameraView.parse(args.camera), scale,
                             title=Path(args.bag).name)
    if args.trajectory:
        motion, twin, joint_map = replay_motion(args.bag, args.trajectory, args.model, args.real_topic)
        source = f'{args.real_topic or "the real stream"} vs its replay under {args.trajectory}'
    else:
        cmp = compare_bag(args.bag, args.real_topic, args.sim_topic, moving_only=False)
        motion, twin, joint_map = bag_motion(cmp), TwinModel(args.model), None
        source = f'real {cmp.real_topic} vs sim {cmp.sim_topic}'
    settings.frame_times(motion)                       # a bad --start/--seconds: one line, nothing drawn
    summary = render_video(path, twin.model, motion, settings, joint_map, progress=True)
    worst = np.argsort(-np.nan_to_num(summary.max_errors, nan=-1.0))[:3]
    print(f'{args.bag}: {source}, {len(motion.joint_names)} joint(s), {motion.end - motion.start:.2f} s')
    print(f'wrote video {path}: {summary.frames} frames, {width}x{height} px at {fps:g} fps '
          f'({summary.frames / fps:.2f} s); largest link errors: '
          + ', '.join(f'{summary.link_names[k]} {summary.max_errors[k] * 1e3:.1f} mm' for k in worst))
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Run ``shadow-twin plot``; returns the exit status (0 ok, 2 bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, printed by argparse)
        return int(exc.code or 0)
    if args.video is not None:
        try:
            return run_reporting_errors('shadow-twin plot', run_video, args)
        except OSError as exc:
            print(f'shadow-twin plot: error: cannot write the video: {exc}', file=sys.stderr)
            return ExitCode.BAD_INPUT
    try:
        for name, flag in _VIDEO_ONLY:
            if getattr(args, name) is not None:
                raise ConfigError(f'{flag} needs --video PATH')
        joints = None
        if args.joints is not None:
            joints = [j.strip() for j in args.joints.split(',') if j.strip()]
            if not joints:
                raise ConfigError('--joints is empty')
        out_dir = args.out if args.out is not None else default_out_dir(args.bag)
        check_out_dir(out_dir, args.bag)
        check_own_files(out_dir, args.force)
        cmp = compare_bag(args.bag, args.real_topic, args.sim_topic, joints, moving_only=not args.all_joints)
        earlier = plotted_files(out_dir)
        written = write_plots(cmp, out_dir)
        names = sorted(earlier | {p.name for p in written})
        write_text_atomic(out_dir / MANIFEST, '\n'.join(names) + '\n')
    except ShadowTwinError as exc:
        print(f'shadow-twin plot: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    except OSError as exc:
        print(f'shadow-twin plot: error: cannot write plots: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    if cmp.paired:
        print(f'{cmp.bag}: real {cmp.real_topic} vs sim {cmp.sim_topic}, {len(cmp.traces)} joint(s)')
    else:
        print(f'{cmp.bag}: {cmp.real_topic or cmp.sim_topic} only (no second JointState stream), '
              f'{len(cmp.traces)} joint(s)')
    for line in format_table(cmp):
        print(line)
    print(f'wrote {len(written)} plots to {out_dir}')
    return ExitCode.OK


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
