"""How a followed object is made to follow, in the model: for each followed free scene object ``N``
(:mod:`shadow_twin.model.scene`), a mocap body ``N_target`` (no geom: it touches nothing) and a weld
equality ``N_follow`` from it to the object, with the object's frame at the target's frame
(``relpose`` the identity), created inactive (``active="false"``: an object nobody has seen yet is
left to physics); :class:`~shadow_twin.simulation.objects.follower.ObjectFollower` moves the target
and switches the weld (``data.eq_active``). Mocap body and equality are written by
``MjSpec.to_xml()`` and read back by ``MjSpec.from_string``, so a model the bridge reloads from MJCF
text keeps them; :func:`followed_objects` finds them again in a compiled model.

**The weld's figures.** MuJoCo's soft constraint (its documentation: Modeling, "Solver parameters")
drives a violated constraint with the reference acceleration ``aref = -b v - k r``, ``b = 2 / (dmax
tc)``, ``k = d / (dmax^2 tc^2 dampratio^2)``, its force mixed with the rest of the dynamics by the
impedance ``d`` (here constant: solimp dmin = dmax = :data:`FOLLOW_IMPEDANCE`), ``tc`` =
:data:`FOLLOW_TIME_CONSTANT` and damping ratio 1 (critical); ``v`` is the object's own velocity (a
mocap body has none). So, for a 0.1 kg box held by the weld alone (each figure measured in the
cell's 2 ms step, implicitfast, and checked by the tests):

* a target moving at V is trailed by ``b V / k = 2 tc V`` (10 mm at 0.5 m/s): the follower puts the
  target ahead of the desired pose by :func:`leads` (``b / k`` = 0.02 s times the velocity, ``1 / k``
  = 5e-5 s^2 times the acceleration), after which the weld's ``aref`` is the desired acceleration
  itself: it pulls an object that moves as desired neither back nor on, whatever moves it (the
  hand, the table); a free box so led tracks a target swinging 0.1 m at 1 Hz (3.9 m/s^2) within
  0.12 mm (p95; 0.31 mm without the acceleration's lead);
* under gravity a free object hangs ``(1 - d) g tc^2`` = 0.49 mm below its target;
* held back by something (a table, a finger), the weld pushes with ``K`` = ``d / (1 - d) k`` =
  ``1 / ((1 - d) tc^2)`` = 20,000 m/s^2 per metre of violation, times the object's mass (that is
  what holds a free object within 0.49 mm against g): a target 5 cm below a table pushes the box
  into it with 94 times its weight, 4.6 mm deep; a target gone 0.2 m past a wall leaves it 20 mm
  inside. Hence the follower's leash (:data:`~.follower.MAX_PUSH`: at most 20 m/s^2 times the
  mass, 1 mm of violation): then 3.0 weights and 0.30 mm on the table, 0.19 mm in the wall.

Why these figures: ``tc`` 0.01 s (five steps of 2 ms; MuJoCo wants at least two) against 0.02 s
(MuJoCo's default for contacts): a box carried on a tray swinging 0.1 m at 0.5 Hz, followed from a
source with the mock motion capture's noise (0.5 mm) and latency (5 ms) at 100 Hz, stays within
1.0 mm (p95) of its true pose against 1.6 mm; at 1 Hz (3.9 m/s^2), 2.5 against 3.7 mm; at rest on
a table, 0.59 against 0.40 mm (a stiffer weld passes more of the source's noise). ``d`` 0.5
against MuJoCo's default 0.9: for the same push bound, ``aref`` may reach ``(1 - d) / d`` times it
under the leash, 1 times (20 m/s^2) against 0.11 (2.2 m/s^2): with 0.9 and tc 0.02 s the box
swinging at 1 Hz slid 0.2 m from its place on the tray, its weld unable to pull it back.
"""

from __future__ import annotations

import math
from typing import Iterable

import mujoco

from shadow_twin.common.errors import ModelError
from shadow_twin.model.scene import object_kinds
from shadow_twin.model.scene.names import FREE

#: s: the follow weld's time constant (solref[0]); its damping ratio is 1.
FOLLOW_TIME_CONSTANT = 0.01
#: The follow weld's impedance, constant (solimp dmin = dmax): see the module doc.
FOLLOW_IMPEDANCE = 0.5
#: The weld's solimp width (m) and the sigmoid's midpoint and power: MuJoCo's defaults, of no
#: effect with dmin = dmax.
_SOLIMP_TAIL = (0.001, 0.5, 2.0)
#: eq_data of the weld: anchor (3) 0, relpose position (3) 0, quaternion (4) identity, torquescale 1,
#: and 0: the relpose is given (not computed from qpos0).
_WELD_DATA = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


def target_name(name: str) -> str:
    """Name of the mocap body object ``name`` follows (``<name>_target``)."""
    return f'{name}_target'


def follow_name(name: str) -> str:
    """Name of the weld equality from the target to object ``name`` (``<name>_follow``)."""
    return f'{name}_follow'


def add_following(spec: mujoco.MjSpec, names: Iterable[str], time_constant: float = FOLLOW_TIME_CONSTANT,
                  impedance: float = FOLLOW_IMPEDANCE) -> list[str]:
    """Make the free scene objects ``names`` of ``spec`` followable (module doc): a mocap body
    ``<name>_target`` at the object's declared pose and an inactive weld ``<name>_follow``, solref
    ``(time_constant, 1)``, solimp ``(impedance, impedance, 0.001, 0.5, 2)``. Apply it after
    :func:`~shadow_twin.model.scene.add_objects` (e.g. in the reloader's ``edit``). The spec is changed
    in place, not compiled.

    Args:
        spec: a model holding the objects.
        names: the objects to follow (repeats ignored).
        time_constant: s, at least twice the model's timestep (MuJoCo's rule for a stable constraint).
        impedance: in (0, 1).
    Returns:
        The names made followable, in order.
    Raises:
        ModelError (one line): a name that is no scene object of the spec, an object that is not free,
            a target or weld name already taken, a time constant or impedance out of range.
    """
    if not (isinstance(time_constant, (int, float)) and time_constant >= 2 * spec.option.timestep):
        raise ModelError(f'follow time constant {time_constant!r} s: expected at least twice the timestep '
                         f'({2 * spec.option.timestep:g} s)')
    if not (isinstance(impedance, (int, float)) and 0.0 < impedance < 1.0):
        raise ModelError(f'follow impedance {impedance!r}: expected a number in (0, 1)')
    kinds = object_kinds(spec)
    done: list[str] = []
    for name in dict.fromkeys(names):
        if name not in kinds:
            raise ModelError(f'cannot follow {name!r}: no scene object of that name; objects: {list(kinds)}')
        if kinds[name] != FREE:
            raise ModelError(f'cannot follow {name!r}: it is fixed to a body (only a free object can follow)')
        if spec.body(target_name(name)) is not None:
            raise ModelError(f'cannot follow {name!r}: the model already has a body named {target_name(name)!r}')
        if any(eq.name == follow_name(name) for eq in spec.equalities):
            raise ModelError(f'cannot follow {name!r}: the model already has an equality named '
                             f'{follow_name(name)!r}')
        body = spec.body(name)
        spec.worldbody.add_body(name=target_name(name), mocap=True, pos=body.pos, quat=body.quat)
        weld = spec.add_equality(name=follow_name(name), type=mujoco.mjtEq.mjEQ_WELD, objtype=mujoco.mjtObj.mjOBJ_BODY,
                                 name1=target_name(name), name2=name)
        weld.data = list(_WELD_DATA)
        weld.solref = [float(time_constant), 1.0]
        weld.solimp = [float(impedance), float(impedance), *_SOLIMP_TAIL]
        weld.active = False
        done.append(name)
    return done


def followed_objects(model: mujoco.MjModel) -> list[str]:
    """The scene objects of a compiled ``model`` that can follow (free, with their mocap target body
    and weld, :func:`add_following`), in scene order."""
    out = []
    for name, kind in object_kinds(model).items():
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, target_name(name))
        weld = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, follow_name(name))
        if kind == FREE and body >= 0 and model.body_mocapid[body] >= 0 and weld >= 0 \
                and int(model.eq_type[weld]) == int(mujoco.mjtEq.mjEQ_WELD):
            out.append(name)
    return out


def leads(model: mujoco.MjModel, weld: int) -> tuple[float, float]:
    """(``b / k`` s, ``1 / k`` s^2) of equality ``weld`` of ``model`` (module doc): a target put ahead of
    the desired pose by ``b / k`` times the desired velocity plus ``1 / k`` times the desired acceleration
    makes the weld's reference acceleration ``aref = -b v - k r`` equal the desired acceleration while the
    object moves as desired: the weld then pulls it neither back nor on, whatever else moves it. At the
    impedance ``d = dmax`` (constant for the welds of :func:`add_following`): ``2 tc dampratio^2`` and
    ``dmax tc^2 dampratio^2`` for a (time constant, damping ratio) solref, the time constant at least
    twice the timestep as MuJoCo makes it (unless its refsafe flag is off); ``damping / stiffness`` and
    ``dmax / stiffness`` for a (-stiffness, -damping) one; (0, 0) for a weld with no stiffness."""
    first, second = (float(v) for v in model.eq_solref[weld])
    dmax = float(model.eq_solimp[weld][1])
    if first > 0:
        if not model.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_REFSAFE):
            first = max(first, 2.0 * float(model.opt.timestep))
        return 2.0 * first * second * second, dmax * first * first * second * second
    if first < 0:
        return second / first, -dmax / first
    return 0.0, 0.0


def push_stiffness(model: mujoco.MjModel, weld: int) -> float:
    """1/s^2: how hard equality ``weld`` of ``model`` pushes an object something holds back, per metre (or
    radian) of violation, per kg (or per kg m^2 of inertia): ``d / (1 - d) k`` at ``d = dmax`` (module
    doc; ``1 / ((1 - d) tc^2)`` for a (time constant, damping ratio 1) solref). The follower's leash
    is the push bound over this. Infinite for a weld with no lead (no stiffness)."""
    _, inverse_k = leads(model, weld)
    dmax = float(model.eq_solimp[weld][1])
    return dmax / (1.0 - dmax) / inverse_k if inverse_k > 0 else math.inf
