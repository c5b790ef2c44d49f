#!/usr/bin/env python3
"""Slip, characterised (issue 36, item 4): how MuJoCo's contact parameters set (a) the creep of a
resting grasp and (b) the slip-onset tilt under a growing tangential load, on the Shadow Hand E
holding a cylinder.

The scenario is ``benchmarks/contacts_slip.py``'s (imported: one implementation; why it is this one:
its docstring): the hand alone closed on ``config/scene_hand.yaml``'s can standing on its stand, the
grasp settled 8 s, the wrist tilted (the fingers tipping over to the palm side) by turning gravity in
the hand's frame. Only the sim's model (the can's scene parameters); the sweep is small on purpose (a
shared 2-core machine: about 45 s of CPU).
Per setting (one factor at a time around the can's scene defaults: solref [0.01, 1], solimp
[0.95, 0.99, 0.001], sliding friction 1.0, condim 4, and the model's options: pyramidal cones, no
noslip iterations; :data:`SETTINGS`):

* **creep** (mm/s): the least-squares slope of the can's displacement in the palm's frame over a
  steady hold of ``--hold`` s (default 10) at a fixed tilt :data:`HOLD_TILT` (the grasp loaded
  along its contacts, well below the slip onset);
* **onset** (deg): the tilt at which the displacement first passes ``contacts_slip.ONSET_MM``
  (1 mm), tilting from 0 at :data:`RATE` (10 deg/s);
* **peak slip** (mm/s) before the onset, and **hold slip** in the hold: the largest contact slip the
  fingertips read (``ContactReader``, 50 Hz): what a slip-speed threshold sees.

Prints a table, writes a figure (creep and onset against solref's time constant, the study's
"time-constant effect on constant contact slippage", and every other factor) to ``--out``
(default ``docs/figures/slip_study.png``, written atomically). MuJoCo raises a solref time
constant under two timesteps (4 ms at 2 ms steps) to 2 timesteps (its ``refsafe`` flag), so the
2 ms row should read as the 4 ms one; that they differ (creep 0.080 and 0.056 mm/s) measures how
sensitive this grasp is to the closing's details. Each setting: two builds, each settled 9.5 s, a
hold and a tilt of up to 18 s. Not part of the tests; needs no ROS.

Usage: .venv/bin/python benchmarks/slip_study.py [--out docs/figures/slip_study.png] [--hold 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / 'benchmarks')]

import contacts_slip as slip  # noqa: E402  (benchmarks/contacts_slip.py, beside this script)
from shadow_twin.common.files import write_bytes_atomic  # noqa: E402  (after the path set-up)
from shadow_twin.plots.figures import figure_png  # noqa: E402

#: rad: the tilt of the steady holds (creep).
HOLD_TILT = np.radians(20.0)
#: rad/s: the tilt rate of the onset runs.
RATE = np.radians(10.0)
#: The can's scene solref and solimp (config/scene_hand.yaml), the centre of the sweep.
SOLREF, SOLIMP = (0.01, 1.0), (0.95, 0.99, 0.001)
ELLIPTIC = int(mujoco.mjtCone.mjCONE_ELLIPTIC)

#: (factor, setting's label, the can's ObjectConfig changes, model.opt changes): one factor at a time.
SETTINGS: list[tuple[str, str, dict, dict]] = (
    [('solref time constant', f'{tc * 1000:g} ms', {'solref': (tc, 1.0)}, {})
     for tc in (0.002, 0.004, 0.01, 0.02, 0.05)]
    + [('solref damping ratio', f'{z:g}', {'solref': (0.01, z)}, {}) for z in (0.5, 1.0, 2.0)]
    + [('solimp dmin, dmax', f'{a:g}, {b:g}', {'solimp': (a, b, 0.001, 0.5, 2.0)}, {})
       for a, b in ((0.5, 0.9), (0.9, 0.95), (0.95, 0.99), (0.99, 0.999))]
    + [('solimp width', f'{w * 1000:g} mm', {'solimp': (0.95, 0.99, w, 0.5, 2.0)}, {}) for w in (0.0002, 0.001, 0.005)]
    + [('sliding friction', f'{mu:g}', {'friction': (mu, 0.005, 0.0)}, {}) for mu in (0.6, 0.8, 1.0, 1.2)]
    + [('condim', '3', {'condim': 3, 'friction': (1.0, 0.0, 0.0)}, {}), ('condim', '4', {}, {}),
       ('condim', '6', {'condim': 6, 'friction': (1.0, 0.005, 0.0001)}, {})]
    + [('noslip iterations', f'{n}', {}, {'noslip_iterations': n}) for n in (0, 3, 10)]
    + [('cone', 'pyramidal', {}, {}), ('cone', 'elliptic', {}, {'cone': ELLIPTIC})])


def measure(changes: dict, options: dict, hold_s: float) -> dict:
    """{creep mm/s, creep_mm over the hold, onset deg, peak mm/s (contact slip before the onset)}
    of one setting (module doc)."""
    held = slip.trial(slip.held_can(False, changes, options), 0.0, HOLD_TILT, hold_s)
    tilt = slip.trial(slip.held_can(False, changes, options), RATE)
    onset = tilt.onset()
    before = np.asarray(tilt.tilt) < onset if np.isfinite(onset) else np.ones(len(tilt.tilt), bool)
    return {'creep': held.creep(), 'creep_mm': held.displacement[-1], 'onset': np.degrees(onset),
            'peak': 1000.0 * float(np.max(np.asarray(tilt.slip)[before], initial=0.0)),
            'hold_peak': 1000.0 * float(np.max(held.slip))}


def draw(rows: list[tuple[str, str, dict]], path: Path) -> Path:
    """The study's figure (module doc) written atomically to ``path``: creep and onset against the
    solref time constant (top), every other setting (bottom)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(13, 10), gridspec_kw={'height_ratios': [1, 1.6]})
    tc = [(float(label.split()[0]), m) for factor, label, m in rows if factor == 'solref time constant']
    x = [t for t, _ in tc]
    top = axes[0, 0]
    top.plot(x, [m['creep'] for _, m in tc], 'o-', label=f"can's creep in the palm frame (hold at "
             f'{np.degrees(HOLD_TILT):.0f} deg)')
    top.plot(x, [m['hold_peak'] for _, m in tc], 's--', label='largest fingertip slip read in the hold')
    top.set(xscale='log', xlabel='solref time constant (ms; MuJoCo raises one under 2 steps to 4 ms)', ylabel='mm/s',
            title='Time-constant effect on constant-contact slippage')
    top.set_xticks(x, [f'{t:g}' for t in x])
    top.minorticks_off()
    top.legend(fontsize=8)
    onset = axes[0, 1]
    onset.plot(x, [m['onset'] for _, m in tc], 'o-', color='C2')
    onset.set(xscale='log', xlabel='solref time constant (ms; 2 ms acts as 4 ms)',
              ylabel=f'tilt at {slip.ONSET_MM:g} mm (deg)',
              title=f'Slip onset, tilting at {np.degrees(RATE):.0f} deg/s')
    onset.set_xticks(x, [f'{t:g}' for t in x])
    onset.minorticks_off()
    others = [(f'{factor}: {label}', m) for factor, label, m in rows if factor != 'solref time constant']
    y = np.arange(len(others))
    default = [m for factor, label, m in rows if factor == 'cone' and label == 'pyramidal'][0]
    for ax, key, unit in ((axes[1, 0], 'creep', "can's creep (mm/s)"), (axes[1, 1], 'onset', 'onset tilt (deg)')):
        values = [m[key] for _, m in others]
        ax.barh(y, np.nan_to_num(values, nan=0.0), color=['C3' if not np.isfinite(v) else 'C0' for v in values])
        ax.axvline(default[key], color='k', lw=0.8, ls=':', label='the scene defaults')
        for k, v in enumerate(values):
            if not np.isfinite(v):
                ax.text(0.5, k, 'none up to 180 deg', va='center', fontsize=7, color='C3')
        ax.set_yticks(y, [label for label, _ in others], fontsize=7)
        ax.invert_yaxis()
        ax.set(xlabel=unit)
        ax.legend(fontsize=8)
    axes[1, 0].set_title('Other factors, one at a time: creep')
    axes[1, 1].set_title('Other factors, one at a time: slip onset')
    fig.suptitle("Shadow Hand E holding config/scene_hand.yaml's can (MuJoCo soft contacts, 2 ms steps)", fontsize=11)
    fig.tight_layout()
    return write_bytes_atomic(path, figure_png(fig))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', type=Path, default=REPO / 'docs' / 'figures' / 'slip_study.png',
                        help='the figure (PNG), written atomically')
    parser.add_argument('--hold', type=float, default=10.0, help='s of each steady hold (creep)')
    args = parser.parse_args(argv)
    started = time.process_time()
    print(f'{"factor":22} {"setting":>12} {"creep mm/s":>10} {"mm/hold":>8} {"hold slip":>9} {"onset deg":>9} '
          f'{"peak mm/s":>9}   (hold {args.hold:g} s at {np.degrees(HOLD_TILT):.0f} deg; tilt at '
          f'{np.degrees(RATE):.0f} deg/s)', flush=True)
    rows = []
    for factor, label, changes, options in SETTINGS:
        m = measure(changes, options, args.hold)
        rows.append((factor, label, m))
        print(f'{factor:22} {label:>12} {m["creep"]:10.3f} {m["creep_mm"]:8.3f} {m["hold_peak"]:9.2f} '
              f'{m["onset"]:9.1f} {m["peak"]:9.2f}', flush=True)
    print(f'figure: {draw(rows, args.out)}; {time.process_time() - started:.0f} s of CPU')
    return 0


if __name__ == '__main__':
    sys.exit(main())
