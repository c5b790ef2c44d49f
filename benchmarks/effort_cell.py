"""Benchmark of the external-force watch on the whole cell with mock hardware (issue 33 item 9).

``shadow-twin up --cell --mock-hardware`` in one child process on a private ROS domain: the mock
UR carries the hand on its flange as the real UR does (config/mock_ur.yaml: the cell reduced to the
UR5's joints, ``shadow_twin.model.mock_models.write_arm_stand_in_mjcf``; damping x3, friction loss
x2 and 0.02 A current noise still set it apart from the twin's model), and the twin monitor predicts
its joint currents by inverse dynamics of the cell model (docs/monitor.md, "External force").
Judged on the messages' stamps (test/support/scenarios/effort_cell.py, shared with test/cli/test_effort_cell.py):

* at rest for ``--rest`` s (default 10): no external-force status other than OK (target: none);
  printed per joint: the mean and largest |residual| (measured - predicted, A) and the thresholds;
* ``--goals`` normal arm goals (default 10) through the twin (mode both: the sim and the mock UR),
  sampled quintic moves of 1 to 6 joints by up to +-0.4 rad in 1.0 to 2.5 s, after a 3 s move to
  the test pose: every goal succeeds, and no status other than OK from the first goal's start to
  the last one's end (target: none); printed: the largest |residual| per joint;
* a 30 N push down on the standing arm's forearm (the mock UR's ``external_wrench``): flagged,
  the time from the push to the first status not OK (target: <= 100 ms, the bare arm's target in
  test/ros/monitor/test_effort_watch_live.py).

Usage: .venv/bin/python benchmarks/effort_cell.py [--rest 10] [--goals 10] [--logs DIR]
Prints the figures, exits 1 when a target is missed. Not part of the tests.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))
sys.path.insert(0, str(REPO))

from support.scenarios import effort_cell as effort  # noqa: E402  (after the path set-up)
from support import ros as ros_helpers  # noqa: E402
from support.scenarios.cell import wait_joints_rest  # noqa: E402

PUSH_DELAY_TARGET_S = 0.1


def check(ok: bool, line: str, misses: list[str]) -> None:
    print(f'{line}: {"PASS" if ok else "FAIL"}', flush=True)
    if not ok:
        misses.append(line)


def thresholds(watch: effort.Watch) -> dict[str, tuple[float, float]]:
    """{joint: (warn, error) A} of the newest statuses."""
    out = {}
    for _, joint, st in effort.statuses(watch):
        values = {kv.key: kv.value for kv in st.values}
        out[joint] = (float(values['warn_threshold']), float(values['error_threshold']))
    return out


def print_residuals(seen: dict, limits: dict[str, tuple[float, float]]) -> None:
    print(f'  {"joint":22s} {"mean A":>8s} {"max |r| A":>10s} {"warn A":>7s} {"error A":>8s}')
    for joint in effort.JOINTS:
        warn, error = limits.get(joint, (float('nan'), float('nan')))
        print(f'  {joint:22s} {seen["mean_residual"][joint]:+8.3f} {seen["max_residual"][joint]:10.3f} '
              f'{warn:7.3f} {error:8.3f}')


def run(client, folder: Path, rest_s: float, goals: int, misses: list[str]) -> None:
    started = time.monotonic()
    watch = effort.start(ros_helpers, client, folder)
    print(f'up --cell --mock-hardware: the effort watch publishing after {time.monotonic() - started:.1f} s',
          flush=True)
    try:
        since = ros_helpers.ros_now()
        ros_helpers.wait_until(lambda: ros_helpers.ros_now() > since + rest_s, 2 * rest_s + 10.0)
        rest = effort.window(watch, since, since + rest_s)
        limits = thresholds(watch)
        print(f'\nat rest, {rest_s:g} s of stamps: {rest["samples"]} samples, {rest["statuses"]} statuses')
        print_residuals(rest, limits)
        check(not rest['flags'], f'at rest: {len(rest["flags"])} flagged status(es) {rest["flags"][:3] or ""}'
                                 f'(target: none)', misses)

        runs = effort.normal_goals(client, watch, goals)
        failed = [(k, why) for k, (_, _, why) in enumerate(runs) if why]
        # from the first of the ten goals (after the move to the test pose) to the last one's end
        seen = effort.window(watch, runs[1][0] if len(runs) > 1 else runs[0][0], runs[-1][1])
        print(f'\n{goals} normal arm goals through the twin, {runs[-1][1] - runs[1][0]:.1f} s of stamps: '
              f'{seen["samples"]} samples, {seen["statuses"]} statuses')
        print_residuals(seen, limits)
        check(not failed, f'goals: {len(runs) - len(failed)} of {len(runs)} succeeded {failed or ""}'
                          f'(target: all; the first is the move to the test pose)', misses)
        check(not seen['flags'], f'through the goals: {len(seen["flags"])} flagged status(es) '
                                 f'{seen["flags"][:3] or ""}(target: none)', misses)

        wait_joints_rest(ros_helpers, [watch.arm], effort.JOINTS)      # the push on the standing arm
        pushed = effort.push(ros_helpers, client, watch)
        if pushed['delay'] is None:
            check(False, f'30 N push on the forearm ({effort.PUSH}): not flagged within 10 s', misses)
        else:
            print()
            check(pushed['delay'] <= PUSH_DELAY_TARGET_S,
                  f'30 N push on the forearm ({effort.PUSH}): flagged {1e3 * pushed["delay"]:.0f} ms after it '
                  f'(stamps), {pushed["joint"]} level {pushed["level"]}, residual {pushed["residual"]:+.3f} A '
                  f'(target <= {1e3 * PUSH_DELAY_TARGET_S:.0f} ms)', misses)
    finally:
        status = watch.cell.up.stop(timeout=30.0)
        check(status == 0, f'up stopped with exit status {status}', misses)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rest', type=float, default=10.0, help='s at rest judged')
    parser.add_argument('--goals', type=int, default=10, help='normal arm goals')
    parser.add_argument('--logs', type=Path, default=None, help='keep the processes\' logs in this folder')
    args = parser.parse_args()
    ros_helpers.isolate_domain()
    misses: list[str] = []
    client = ros_helpers.RosClient('effort_cell_benchmark')
    try:
        with tempfile.TemporaryDirectory(prefix='effort_cell_') as tmp:
            folder = Path(tmp) if args.logs is None else args.logs
            folder.mkdir(parents=True, exist_ok=True)
            try:
                run(client, folder, args.rest, args.goals, misses)
            except (AssertionError, RuntimeError, TimeoutError) as exc:
                check(False, f'the run stopped: {exc}'[:2000], misses)
    finally:
        client.close()
    print('all targets met' if not misses else f'{len(misses)} target(s) missed')
    return 1 if misses else 0


if __name__ == '__main__':
    sys.exit(main())
