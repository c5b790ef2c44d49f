"""Section ``agreement`` of ``benchmarks/contacts.py`` (issue 36, "Contacts: fingertip contact, sim vs
mock, agrees >= 95 % of samples through a grasp-and-release").

The hand alone (``config/scene_hand.yaml``: the can on its stand within the fingers' reach; the issue's
contacts are the fingertips', and the hand scene has them close on the can without an arm to place it,
nothing held in place by hand as the cell's grasp needs), twice, in lock step (2 physics steps, 4 ms, a
tick of the bridge): the **mock** with the mock hardware's physics (``config/mock_hardware.yaml``: the
scene's friction x ``scene_friction_scale``, mass x ``scene_mass_scale``, its finger damping and
friction-loss ``overrides``) and the **sim** with the model's. The same trajectory on both from the
same stamped start: open ``OPEN_S`` s, close in ``CLOSE_S`` s, hold ``HOLD_S`` s, open again in
``RELEASE_S`` s, rest ``REST_S`` s. Two grasps, one after the other: the **firm** grasp of the cell demo's
pick-up (:data:`shadow_twin.control.pick.GRASP`: the fingers commanded past where the can stops them,
so that their drives squeeze it; the target applies to it) and the **light** one of the cost section
(:data:`contacts.GRASP`: the fingers just reach the can; printed, no target). The light grasp holds
the can near the limit of friction: on the mock (friction x 0.6, mass x 1.3) the can shifts within the
hold and the first finger lets go, the sim's stays (93.6 % when measured): a grasp at the limit of
friction differs with the contact parameters, which is what the contact calibration (issue 37) is for. Each side's contacts are read with
:class:`ContactReader` at the bridge's default ``contact_rate`` (50 Hz: every 5th tick) and fed to the
monitor's :class:`ContactAgreement` (the mock the reference, 'real'; stamp tolerance 10 ms).

Printed per fingertip (the reader's labels 'ff' ... 'th': the distal phalanges; and the palm, no
target): the agreement, the samples in contact on each side. Target: the fingertips' samples together agree >= 95 %.
"""

from __future__ import annotations

from shadow_twin.control.pick import GRASP as FIRM_GRASP
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.monitoring.slip import ContactAgreement
from shadow_twin.simulation.contact_sensing import ContactReader

import contacts
from contacts_following import mock_and_sim

AGREEMENT_MIN = 0.95          # issue 36
CONTACT_RATE = 50.0           # Hz, the bridge's default contact_rate
OPEN_S, HOLD_S, RELEASE_S, REST_S = 0.3, 1.5, 1.0, 0.5
FINGERTIPS = ('ff', 'mf', 'rf', 'lf', 'th')      # ContactReader's labels of the distal phalanges


def run(check, args) -> None:
    """The agreement section (module doc): the firm grasp (the target), then the light one."""
    for name, posture in (('firm', FIRM_GRASP), ('light', contacts.GRASP)):
        grasp_and_release(check if name == 'firm' else None, name, posture)


def grasp_and_release(check, name: str, posture: dict) -> None:
    """One grasp and release of ``posture`` {joint: rad} on the mock and the sim; ``check`` None: no target."""
    print(f'== agreement, {name} grasp: fingertip contact, sim vs mock (hand alone, scene_hand.yaml), read at '
          f'{CONTACT_RATE:.0f} Hz through a grasp ({contacts.CLOSE_S:.1f} s), hold ({HOLD_S:.1f} s) and release '
          f'({RELEASE_S:.1f} s)',
          flush=True)
    mock, sim = mock_and_sim(None, 'scene_hand.yaml', ())
    readers = {'real': ContactReader(mock.model), 'sim': ContactReader(sim.model)}
    agreement = ContactAgreement(window=1e6, tolerance=0.01, reference='real', other='sim')
    names, grasp = list(posture), list(posture.values())
    start = mock.time + OPEN_S
    opened = [float(mock.data.qpos[mock.model.joint(n).qposadr[0]]) for n in names]
    t_close, t_hold = contacts.CLOSE_S, contacts.CLOSE_S + HOLD_S
    trajectory = JointTrajectory(names, [t_close, t_hold, t_hold + RELEASE_S], [grasp, grasp, opened])
    for s in (mock, sim):
        s.set_trajectory(trajectory, start_time=start)
    every = int(round(1.0 / (CONTACT_RATE * contacts.STEPS_PER_TICK * sim.dt)))
    ticks = int(round((OPEN_S + t_hold + RELEASE_S + REST_S) / (contacts.STEPS_PER_TICK * sim.dt)))
    in_contact = {side: {} for side in readers}
    for k in range(ticks):
        for s in (mock, sim):
            s.step(contacts.STEPS_PER_TICK)
        if (k + 1) % every:
            continue
        for side, s in (('real', mock), ('sim', sim)):
            for label, reading in readers[side].read(s.data).items():
                agreement.add(side, label, s.time, reading.in_contact)
                in_contact[side][label] = in_contact[side].get(label, 0) + bool(reading.in_contact)
    agreed = matched = 0
    for label, got in agreement.agreements().items():
        line = (f'  {label}: agrees {got.fraction * 100:.1f} % ({got.agreed} of {got.matched} samples, '
                f'{got.unmatched} unmatched); samples in contact: mock {in_contact["real"].get(label, 0)}, '
                f'sim {in_contact["sim"].get(label, 0)}')
        if label in FINGERTIPS:
            agreed, matched = agreed + got.agreed, matched + got.matched
            print(line)
        else:
            print(line + ' (no target)')
    touched = [label for label in FINGERTIPS if in_contact['real'].get(label, 0)]
    fraction = agreed / matched if matched else float('nan')
    target = 'no target' if check is None else f'target >= {AGREEMENT_MIN * 100:.0f} %'
    line = (f'  fingertips together: agree {fraction * 100:.1f} % of {matched} samples ({target}); fingertips '
            f'that touched the can on the mock: {", ".join(touched) or "none"}')
    if check is None:
        print(line)
        return
    check(matched > 0 and fraction >= AGREEMENT_MIN and len(touched) >= 3, line)
