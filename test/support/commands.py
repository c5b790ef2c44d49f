"""Running the ``shadow-twin`` commands in this process, and the small inputs the bad-input tests of
the offline commands share (``test/cli/test_offline_bad_input.py``, ``test_bad_input_round2.py``,
``test/core/simulation/test_effort_bad_input.py``)."""

from __future__ import annotations

import contextlib
import io

from shadow_twin.cli import main as cli

#: A first-finger trajectory in Shadow's waypoint format (two points).
FF = {'hand_joints_order': ['FFJ1', 'FFJ2', 'FFJ3', 'FFJ4'],
      'hand_trajectories': {'ff': [{'joint_angles': [0.2, 0.4, 0.6, 0.0], 'interpolate_time': 0.6},
                                   {'joint_angles': [0.3, 0.6, 1.0, 0.1], 'interpolate_time': 0.6}]}}
#: A search space of one dimension: rh_FFJ3's damping, +/-50 %.
SPACE = {'parameters': [{'name': 'J3_damping', 'joints': ['rh_FFJ3'], 'attribute': 'damping',
                         'bounds': {'relative': 0.5}}]}


def run_cli(argv, module=cli) -> tuple[int, str, str]:
    """Run ``module.main(argv)`` (default: ``shadow-twin``) here: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = module.main(argv)
        except SystemExit as exc:      # a usage error (argparse), exit 2
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def one_line(code, out, err, command):
    """The one error line of a refused command (exit 2, nothing on stdout)."""
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and out == '', (code, out, err)
    assert lines[0].startswith(f'shadow-twin {command}: error: '), lines[0]
    return lines[0]
