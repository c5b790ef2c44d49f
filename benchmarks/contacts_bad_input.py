"""Section ``bad_input`` of ``benchmarks/contacts.py`` (issue 36, "Bad input: jumps beyond a physical
speed, NaN, stamps going back, a silent source. Each is dropped or held with one warning per source,
never followed").

A live simulation of the hand alone (``config/scene_hand.yaml``) follows its can, standing on its
stand, from a good source: its own pose at 100 Hz (stamped with sim time, the motion capture's rate).
Then, one case after another, each after ``GOOD_S`` s of good samples (more than the gate's ``rearm``:
each kind may be reported again), the source sends ``REPEATS`` bad samples, each between two good ones,
and then ``AFTER_S`` s of good samples:

* NaN position; a non-unit quaternion (norm 2); a 0.5 m jump (stamps good); stamps going back
  (0.1 s before the previous, 5 cm off); a stamp in the future (1 s ahead, 5 cm off); a silent source
  (no sample for the gate's timeout + 0.3 s, then the good stream again).

Printed per case: what the gate made of the bad samples (dropped or, for a silence, the object released
to physics: held by its stand), the number of warnings of that kind (the verdicts' ``report`` and the
queued warnings, :meth:`LiveSimulation.take_object_warnings`; target: exactly 1 per kind and source),
and how far the can moved toward the bad pose (the displacement along the direction to it; for NaN, a
non-unit quaternion or a silence, the displacement's length): target below ``MOVED_MAX``. The unit
tests (``test/core/simulation/test_object_following.py``) test each rule; this section prints figures
on the live simulation the bridge runs.
"""

from __future__ import annotations

import numpy as np

from shadow_twin.common.paths import config_path
from shadow_twin.model.scene import SceneConfig
from shadow_twin.simulation.live.entities import object_motion
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.objects.gate import FUTURE, JUMP, NOT_AFTER, NOT_FINITE, NOT_UNIT, SILENT

RATE = 100.0                 # Hz, the good source
GOOD_S = 1.5                 # s of good samples before each case (the gate's rearm is 1 s)
AFTER_S = 0.3                # s of good samples after the bad ones, before the displacement is taken
REPEATS = 5                  # bad samples per case
#: m: how far the can may move toward a bad pose (its creep on the stand over the case is far less).
MOVED_MAX = 0.0002


def _case_sample(kind: str, t: float, p: np.ndarray, q: np.ndarray):
    """(stamp, position, quat, the bad position or None) of a bad sample of ``kind`` at sim time ``t``."""
    off = p + [0.05, 0.0, 0.0]
    if kind == NOT_FINITE:
        return t, np.array([np.nan, p[1], p[2]]), q, None
    if kind == NOT_UNIT:
        return t, p, 2.0 * q, None
    if kind == JUMP:
        return t, p + [0.5, 0.0, 0.0], q, p + [0.5, 0.0, 0.0]
    if kind == NOT_AFTER:
        return t - 0.1, off, q, off
    return t + 1.0, off, q, off        # FUTURE


def run(check, args) -> None:
    """The bad_input section (module doc)."""
    print('== bad_input: the hand scene\'s can followed from a good 100 Hz source, then each bad case', flush=True)
    sim = LiveSimulation(None, scene=SceneConfig.from_yaml(config_path('scene_hand.yaml')), followed=['can'])
    sim.name_object_sources({'can': 'can (/mocap/can/pose)'})
    steps = int(round(1.0 / (RATE * sim.dt)))
    sim.step(int(round(0.5 / sim.dt)))                     # the can settles on its stand
    home = object_motion(sim, 'can')
    p_home, q_home = home.position.copy(), home.quat.copy()
    reports: list[str] = []

    def good(seconds: float) -> None:
        for _ in range(int(round(seconds * RATE))):
            verdict = sim.offer_object_pose('can', sim.time, p_home, q_home)
            if not verdict.accepted or verdict.report:
                reports.append(verdict.kind or 'restart')
            sim.step(steps)
            reports.extend(SILENT for w in sim.take_object_warnings() if 'silent' in w)

    good(GOOD_S)
    for kind in (NOT_FINITE, NOT_UNIT, JUMP, NOT_AFTER, FUTURE, SILENT):
        good(GOOD_S)
        reports.clear()
        before = object_motion(sim, 'can').position.copy()
        counts_before = dict(sim.objects.gate('can').counts)
        warned, wrong, bad_at = 0, 0, None
        if kind == SILENT:
            sim.step(int(round((sim.objects.gate('can').limits.timeout + 0.3) / sim.dt)))
            warned += sum('silent' in w for w in sim.take_object_warnings())
        else:
            for _ in range(REPEATS):
                stamp, p, q, bad_at = _case_sample(kind, sim.time, p_home, q_home)
                verdict = sim.offer_object_pose('can', stamp, p, q)
                warned += verdict.report and not verdict.accepted
                wrong += verdict.accepted or verdict.kind != kind     # followed, or dropped for another reason
                sim.step(steps)
                good(1.0 / RATE)
        good(AFTER_S)
        warned += sum(1 for r in reports if r == kind)
        moved = object_motion(sim, 'can').position - before
        counts = {k: v - counts_before.get(k, 0) for k, v in sim.objects.gate('can').counts.items()}
        if bad_at is not None:
            direction = (bad_at - before) / np.linalg.norm(bad_at - before)
            toward, how = float(moved @ direction), 'toward the bad pose'
        else:
            toward, how = float(np.linalg.norm(moved)), 'in all'
        outcome = ('released to physics (held by its stand), followed again at the next good sample'
                   if kind == SILENT else f'{counts[kind]} of {REPEATS} dropped as {kind!r}, {wrong} otherwise')
        check(warned == 1 and abs(toward) <= MOVED_MAX and (kind == SILENT or counts[kind] == REPEATS) and not wrong,
              f'  {kind}: {outcome}; warnings {warned} (target 1); the can moved {toward * 1e3:.3f} mm {how} '
              f'(target <= {MOVED_MAX * 1e3:.1f} mm)')
