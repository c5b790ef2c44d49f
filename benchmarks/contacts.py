#!/usr/bin/env python3
"""Benchmark of the contact outputs (issue 36: objects, contacts and slip).

Sections (``--sections``, all by default):

* **cost**: what the contact reading adds to the bridge's tick at 250 Hz. The bridge steps 2 ms
  physics steps, 2 per 4 ms tick (``LiveSimulation.step(2)``); with contact outputs it also reads
  every label's contact (``ContactReader.read(sim.data)``,
  :mod:`shadow_twin.simulation.contact_sensing`) once per tick. Both are timed tick by tick
  (``time.perf_counter``) in one run, the two conditions alternating in blocks of ``--ticks``
  ticks (A B B A ..., ``--blocks`` blocks each, so that a drift of the machine's speed falls on
  both alike); each block starts from the same saved state (``mj_getState``/``mj_setState``:
  qpos, qvel, act, warm start; the sim time runs on), so that every block has the same contacts.
  The ticks run back to back: what the reading costs includes the cache misses it has (the physics
  evicted its code and data) and those it leaves to the next step. Printed: the median tick cost
  without and with the reading, their ratio (target <= 1.30: the issue's "the step costs at most
  30 % more than without them", the cell's: the hand alone's step is cheaper, the reading the
  same, its ratio is printed without a target) and, computed from the same figures, the ratio at
  the bridge's default ``contact_rate`` (50 Hz: a reading every 5th tick); the contacts of an
  untimed block from the same state. On two models:

  - the cell (``write_cell_mjcf``: MiR250, cabinet, UR5, hand; ``config/scene.yaml``'s objects,
    the MiR, the can and the ball free when written; the cell's gains
    ``config/controllers/cell.yaml``, as the bridge runs it): the arm holds the hand fingers up,
    the can is held in the hand while the fingers close on it (1 s), then let go: it hangs in the
    five fingertips' grip, against gravity;
  - the hand alone (``config/scene_hand.yaml``, the bridge's default gains): the fingers close on
    the can standing on its stand (1 s), then hold it.

* **following** (``contacts_following.py``): object pose, sim vs the mock's motion capture (100 Hz, 5 ms,
  0.5 mm), the cell's can and ball followed: at rest (target <= 1 mm p95), and the can while the arm
  carries it (target <= 2 mm and 1 deg p95);
* **slip** (``contacts_slip.py``): the slip warning on a held cylinder, the wrist tilting until it slips;
* **agreement** (``contacts_agreement.py``): fingertip contact, sim vs mock (the hand alone), read at
  50 Hz through a grasp, hold and release, judged by the monitor's ``ContactAgreement`` (target >= 95 %);
* **bad_input** (``contacts_bad_input.py``): a followed object's source sends NaN, a non-unit
  quaternion, a 0.5 m jump, stamps going back, a stamp in the future, or goes silent: each dropped or
  held, one warning per kind, the object not moved toward the bad pose.

Other processes on the machine skew the figures (both conditions alike, since they alternate):
run it on a quiet machine. Exit status 1 when a target is missed.

Usage: .venv/bin/python benchmarks/contacts.py [--sections cost following ...] [--blocks 30] [--ticks 200]
Not part of the tests; needs no ROS.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / 'benchmarks')]

from checks import Checks  # noqa: E402  (benchmarks/checks.py, beside this script)
from shadow_twin.common.paths import config_path  # noqa: E402  (after the path set-up)
from shadow_twin.control.trajectory import JointTrajectory  # noqa: E402
from shadow_twin.model.cell.assembly import arm_joint_names, write_cell_mjcf  # noqa: E402
from shadow_twin.model.scene import SceneConfig  # noqa: E402
from shadow_twin.simulation.contact_sensing import ContactReader  # noqa: E402
from shadow_twin.simulation.live.entities import EntityMotion, set_object_motion  # noqa: E402
from shadow_twin.simulation.live.simulation import LiveSimulation  # noqa: E402

#: Target: tick cost with the contact reading / without it (issue 36).
COST_RATIO_MAX = 1.30
#: Physics steps per bridge tick: 250 Hz publishing, 2 ms timestep.
STEPS_PER_TICK = 2
#: The grasp (rad): fingers J3, J2, J1 flexed, the thumb opposed; it closes on the can of either scene.
GRASP = {**{f'rh_{f}J{j}': q for f in ('FF', 'MF', 'RF', 'LF') for j, q in ((3, 1.0), (2, 0.8), (1, 0.6))},
         'rh_THJ5': 0.4, 'rh_THJ4': 1.1, 'rh_THJ2': 0.3, 'rh_THJ1': 0.5}
CLOSE_S = 1.0            # s to close
SETTLE_S = 0.5           # s of holding before the state is saved
#: The arm (UR5 joints, rad) with the hand's fingers pointing up (+z), above the cabinet.
ARM_FINGERS_UP = (0.0, 0.0, 0.0, -np.pi / 2, np.pi / 2, 0.0)
#: Where the hand scene's can stands in the hand's frame (``config/scene_hand.yaml``: the forearm
#: at the world origin there), m: the cell's can is held there while the fingers close.
CAN_IN_HAND = np.array([0.005, -0.075, 0.31])
SAVED = mujoco.mjtState.mjSTATE_PHYSICS | mujoco.mjtState.mjSTATE_WARMSTART


def close_hand(sim: LiveSimulation, hold=None) -> None:
    """Close the fingers to :data:`GRASP` in :data:`CLOSE_S` and hold :data:`SETTLE_S`; ``hold()``
    runs before each tick while they close (it keeps an object in place)."""
    sim.set_trajectory(JointTrajectory(list(GRASP), [CLOSE_S], [list(GRASP.values())]))
    for _ in range(int(round(CLOSE_S / (STEPS_PER_TICK * sim.dt)))):
        if hold is not None:
            hold()
        sim.step(STEPS_PER_TICK)
    sim.step(int(round(SETTLE_S / sim.dt)))


def hand_grasp() -> LiveSimulation:
    """The hand alone closed on the can of ``config/scene_hand.yaml``."""
    sim = LiveSimulation(None, scene=SceneConfig.from_yaml(config_path('scene_hand.yaml')))
    close_hand(sim)
    return sim


def cell_grasp(folder: Path) -> LiveSimulation:
    """The cell, the hand fingers up holding the can of ``config/scene.yaml`` (module doc)."""
    path, _ = write_cell_mjcf(None, folder / 'cell.xml')
    sim = LiveSimulation(path, gains=config_path('controllers', 'cell.yaml'),
                         scene=SceneConfig.from_yaml(config_path('scene.yaml')))
    sim.set_positions(dict(zip(arm_joint_names(), ARM_FINGERS_UP)))
    forearm = sim.model.body('rh_forearm').id
    at = sim.data.xpos[forearm] + sim.data.xmat[forearm].reshape(3, 3) @ CAN_IN_HAND
    can = EntityMotion(at, sim.data.xquat[forearm].copy())    # upright in the hand, as in the hand's scene
    close_hand(sim, lambda: set_object_motion(sim, 'can', can))
    return sim


def tick_costs(sim: LiveSimulation, reader: ContactReader, blocks: int, ticks: int) -> dict:
    """Per-tick wall times (s) of ``sim.step(2)`` alone ('without') and followed by
    ``reader.read(sim.data)`` ('with'), ``blocks`` blocks of ``ticks`` ticks each, alternating
    A B B A ... from the state ``sim`` is in now. Between two ticks both conditions do the same
    (keep the last result), so that neither leaves the caches colder for the next tick than the
    other; a reading is dropped at the next tick, as the bridge drops it once published. Then an
    untimed block from the same state: the contacts MuJoCo listed and the label contacts read."""
    model, data = sim.model, sim.data
    state = np.empty(mujoco.mj_stateSize(model, SAVED))
    mujoco.mj_getState(model, data, state, SAVED)
    times: dict[str, list[float]] = {'without': [], 'with': []}
    clock, step, read = time.perf_counter, sim.step, reader.read
    for block in range(2 * blocks):
        condition = ('without', 'with', 'with', 'without')[block % 4]
        out, last = times[condition], [None]      # the last result: dropped at the next tick
        with sim.lock:
            mujoco.mj_setState(model, data, state, SAVED)
        if condition == 'without':
            for _ in range(ticks):
                t0 = clock()
                step(STEPS_PER_TICK)
                t1 = clock()
                out.append(t1 - t0)
                last[0] = data
        else:
            for _ in range(ticks):
                t0 = clock()
                step(STEPS_PER_TICK)
                last[0] = read(data)
                t1 = clock()
                out.append(t1 - t0)
    with sim.lock:
        mujoco.mj_setState(model, data, state, SAVED)
    counted, listed, labels = [], [], set()
    for _ in range(ticks):
        step(STEPS_PER_TICK)
        reading = read(data)
        counted.append(sum(r.n_contacts for r in reading.values()))
        listed.append(data.ncon)
        labels.update(label for label, r in reading.items() if r.in_contact)
    return {'without': np.array(times['without']), 'with': np.array(times['with']), 'counted': np.array(counted),
            'listed': np.array(listed), 'labels': [label for label in reader.labels if label in labels]}


#: Ticks per reading at the bridge's default contact_rate (50 Hz) and publish_rate (250 Hz).
DEFAULT_EVERY = 5


def cost(check: Checks, blocks: int, ticks: int) -> None:
    """The cost section (module doc)."""
    print(f'== cost: a 250 Hz tick ({STEPS_PER_TICK} physics steps) without and with the contact reading, '
          f'{blocks} blocks of {ticks} ticks each, alternating', flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for name, build in (('cell', lambda: cell_grasp(Path(folder))), ('hand alone', hand_grasp)):
            sim = build()
            reader = ContactReader(sim.model)
            got = tick_costs(sim, reader, blocks, ticks)
            without, with_ = float(np.median(got['without'])), float(np.median(got['with']))
            ratio = with_ / without
            free = int(np.count_nonzero(sim.model.jnt_type == mujoco.mjtJoint.mjJNT_FREE))
            print(f'  {name}: {sim.model.nbody} bodies ({free} free), {sim.model.ngeom} geoms, '
                  f'{"elliptic" if sim.model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC else "pyramidal"} cones; '
                  f'contacts while read: {np.median(got["listed"]):.0f} listed by MuJoCo (median; '
                  f'{got["listed"].min()}-{got["listed"].max()}), {np.median(got["counted"]):.0f} counted on the '
                  f'labels ({got["counted"].min()}-{got["counted"].max()}; labels in contact: '
                  f'{", ".join(got["labels"]) or "none"})')
            print(f'  {name}: tick median without {without * 1e6:.1f} us, with {with_ * 1e6:.1f} us (the reading '
                  f'{(with_ - without) * 1e6:.1f} us); p90 without {np.percentile(got["without"], 90) * 1e6:.1f} us, '
                  f'with {np.percentile(got["with"], 90) * 1e6:.1f} us', flush=True)
            # at the bridge's default contact_rate the reading runs every DEFAULT_EVERY-th tick
            amortised = 1.0 + (ratio - 1.0) / DEFAULT_EVERY
            line = (f'  {name}: tick cost with / without contact outputs read every tick {ratio:.3f}, at the default '
                    f'contact_rate (every {DEFAULT_EVERY}th tick) {amortised:.3f}')
            if name != 'cell':          # the target is the cell's
                print(line + ' (no target)')
                continue
            check(ratio <= COST_RATIO_MAX and got['counted'].min() > 0,
                  f'{line} (target <= {COST_RATIO_MAX:.2f} every tick; every reading with counted contacts: '
                  f'{"yes" if got["counted"].min() > 0 else "NO"})')


#: Sections other than cost: each a module ``benchmarks/contacts_<section>.py`` beside this script with
#: ``run(check: Checks, args)`` (and ``add_arguments(parser)`` for its own options); it may import this
#: module's scenes (``contacts.cell_grasp``, ``contacts.hand_grasp``, ``contacts.close_hand``).
SECTION_MODULES = ('following', 'slip', 'agreement', 'bad_input')
SECTIONS = ('cost',) + SECTION_MODULES


def section_module(name: str):
    """The module of section ``name`` (imported on first use: a section's scenes cost nothing unless run)."""
    return importlib.import_module(f'contacts_{name}')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sections', nargs='+', choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument('--blocks', type=int, default=30, help='blocks per condition (cost section)')
    parser.add_argument('--ticks', type=int, default=200, help='ticks per block (cost section)')
    for name in SECTION_MODULES:
        adder = getattr(section_module(name), 'add_arguments', None)
        if adder is not None:
            adder(parser)
    args = parser.parse_args(argv)
    check = Checks()
    started = time.perf_counter()
    for name in args.sections:
        if name == 'cost':
            cost(check, args.blocks, args.ticks)
        else:
            section_module(name).run(check, args)
    print(f'{len(check.failed)} target(s) missed; {time.perf_counter() - started:.0f} s')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
