"""Section ``lift`` of the grasp benchmark: what a grasp-and-lift run would add to the contact protocol
(issue 37 names it beside "tilt until slip" and "a push across the table"). A measurement, no target: it
prints why the protocol (``config/calibration/contact_protocol.yaml``) has no lift run.

**The run, as the hand-alone replay would make it:** the protocol's fixture and can
(``config/scene_contacts_hand.yaml``), the fingers closed to a grip and settled as every grip run
(:func:`~shadow_twin.calibration.contacts.tilt.settle`); then the support is gone (the fixture's contacts
switched off: the hand lifted clear of the plate) and the can hangs in the grip for :data:`HANG_S`; then the
arm lifts the hand, which in the hand's frame is gravity raised by the lift's acceleration: +:data:`LIFT_ACCEL`
for :data:`LIFT_S`, -:data:`LIFT_ACCEL` as long (to 0.5 m/s and back to rest: 125 mm up), then :data:`HOLD_S` at rest.

**Measured** for three grips (the protocol's; :data:`TIGHT_GRIP`, each finger's J3, J2, J1 0.2 rad further
closed, the thumb further across; :data:`DEEP_GRIP`, 0.4 rad further) and two sets of solver options (the hand-alone model's, a pyramidal friction
cone with impratio 1, and the robots' model's, the cell's elliptic cone with impratio 10, set on the same
hand model), on the mock (``grasp_calibration``'s: the can's friction 0.6 and mass 0.195 kg, the fingers'
overrides): where the can is when the lift begins and at the end (mm from where it stood when the support went),
and how far the can's path and the grip's efforts move (RMS over the run) when the can's friction or mass is 10 %
higher: what a fit could see, against the capture's noise (0.5 mm a coordinate), the efforts' step (1 mN m)
and what the friction 0.1 % higher moves (the replay's chaos: what a fit cannot tell from noise).

Usage: ``.venv/bin/python benchmarks/grasp.py --sections lift`` (about 3 minutes; exit 0: no target).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from contacts_slip import MOCK_FRICTION, MOCK_MASS, mock_overrides
from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.calibration.contacts.tilt import G, settle
from shadow_twin.common.paths import config_path
from shadow_twin.model.scene import SceneConfig
from shadow_twin.simulation.live.simulation import LiveSimulation

PROTOCOL = config_path('calibration', 'contact_protocol.yaml')
#: s the can hangs in the grip once the support is gone, before the lift.
HANG_S = 1.0
#: m/s^2 and s: the lift's acceleration, then as long its deceleration.
LIFT_ACCEL, LIFT_S = 2.0, 0.25
#: s at rest after the lift.
HOLD_S = 1.0
#: s between samples (the protocol's capture).
SAMPLE_S = 0.02
#: The solver options compared: the hand-alone model's and the robots' (the cell's).
SOLVERS = {'hand-alone options (pyramidal, impratio 1)': (mujoco.mjtCone.mjCONE_PYRAMIDAL, 1.0),
           "robots' options (elliptic, impratio 10)": (mujoco.mjtCone.mjCONE_ELLIPTIC, 10.0)}
#: A grip closed further than the protocol's (rad): fingers J3 1.2, J2 1.0, J1 0.8; the thumb further across.
TIGHT_GRIP = {**{f'rh_{f}J{j}': q for f in ('FF', 'MF', 'RF', 'LF') for j, q in ((3, 1.2), (2, 1.0), (1, 0.8))},
              'rh_THJ5': 0.5, 'rh_THJ4': 1.2, 'rh_THJ2': 0.5, 'rh_THJ1': 0.7}
#: A grip closed further still (rad): fingers J3 1.4, J2 1.2, J1 1.0; the thumb across and bent. Of the grips tried
#: (a fist, J2 and J1 bent further, the thumb further opposed) the one that kept the mock's can.
DEEP_GRIP = {**{f'rh_{f}J{j}': q for f in ('FF', 'MF', 'RF', 'LF') for j, q in ((3, 1.4), (2, 1.2), (1, 1.0))},
             'rh_THJ5': 0.6, 'rh_THJ4': 1.2, 'rh_THJ2': 0.6, 'rh_THJ1': 0.9}


def add_arguments(parser) -> None:
    """No options of its own."""


def lift(protocol: ContactProtocol, grip: dict, solver: tuple, friction: float = 1.0,
         mass: float = 1.0) -> tuple[np.ndarray, np.ndarray, int]:
    """One lift run on the mock (module doc) with the can's friction and mass times ``friction`` and ``mass``;
    returns the can's displacement (N,) m from where it stood when the support went, the grip joints' efforts
    (N, J) N m, and the sample index where the lift begins."""
    scene = SceneConfig.from_yaml(protocol.scene).scaled(MOCK_FRICTION * friction, MOCK_MASS * mass)
    sim = LiveSimulation(None, scene=scene, overrides=mock_overrides())
    model = sim.model
    model.opt.cone, model.opt.impratio = solver
    settle(sim, dataclasses.replace(protocol, grip=grip), True)
    can = model.body(protocol.object).id
    for geom in range(model.ngeom):               # the support gone: the fixture's contacts off
        if model.body(model.geom_bodyid[geom]).name.startswith('stand'):
            model.geom_contype[geom] = model.geom_conaffinity[geom] = 0
    start = sim.data.xpos[can].copy()
    columns = [sim.joint_names.index(name) for name in grip]
    steps = int(round(SAMPLE_S / sim.dt))
    times = np.arange(1, int(round((HANG_S + 2 * LIFT_S + HOLD_S) / SAMPLE_S)) + 1) * SAMPLE_S
    moved, effort = np.empty(len(times)), np.empty((len(times), len(grip)))
    for k, t in enumerate(times):
        up = LIFT_ACCEL if HANG_S < t <= HANG_S + LIFT_S else -LIFT_ACCEL if t <= HANG_S + 2 * LIFT_S else 0.0
        model.opt.gravity[:] = (0.0, 0.0, -G - (up if t > HANG_S else 0.0))
        sim.step(steps)
        moved[k] = np.linalg.norm(sim.data.xpos[can] - start)
        effort[k] = sim.joint_state().effort[columns]
    return moved, effort, int(round(HANG_S / SAMPLE_S))


def rms(a: np.ndarray) -> float:
    """Root mean square of ``a``'s entries."""
    return float(np.sqrt(np.mean(np.square(a))))


def run(check, args) -> None:
    """The lift section (module doc): prints, checks nothing."""
    protocol = ContactProtocol.from_yaml(PROTOCOL)
    print(f'== lift: a grasp-and-lift run on the mock (can friction {MOCK_FRICTION:.2f}, mass x{MOCK_MASS}), the '
          f'support gone, {HANG_S:.1f} s hanging, a +-{LIFT_ACCEL:.1f} m/s^2 lift over {2 * LIFT_S:.1f} s '
          f'(no target)', flush=True)
    for grip_name, grip in (('protocol grip', protocol.grip), ('tighter grip', TIGHT_GRIP),
                             ('deep grip', DEEP_GRIP)):
        for solver_name, solver in SOLVERS.items():
            moved, effort, begin = lift(protocol, grip, solver)
            line = (f'  {grip_name}, {solver_name}: the can {moved[begin - 1] * 1e3:.1f} mm down when the lift '
                    f'begins, {moved[-1] * 1e3:.1f} mm at the end')
            if moved.max() > 0.05:
                print(f'{line}: dropped (a fall: no path a fit can follow)', flush=True)
                continue
            seen = []
            for what, factors in (('friction', (1.1, 1.0)), ('mass', (1.0, 1.1)), ('friction', (1.001, 1.0))):
                other, other_effort, _ = lift(protocol, grip, solver, *factors)
                seen.append(f'{what} +{(max(factors) - 1) * 100:g} %: the path {rms(other - moved) * 1e3:.2f} mm RMS, the efforts '
                            f'{rms(other_effort - effort) * 1e3:.1f} mN m RMS'
                            + (' (it dropped)' if other.max() > 0.05 else ''))
            print(f'{line}; {"; ".join(seen)}', flush=True)
