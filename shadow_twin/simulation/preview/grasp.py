"""Grasp preview: does a held object stay in the hand through a predicted run (ROS-free; issue 37).

**Held.** A free scene object (:func:`shadow_twin.model.scene.object_kinds`) is held at the start of a
run when at least ``grasp_min_fingertips`` (2) of the hand's fingertips touch it and nothing but the
hand does (it is off its support: carried), or when it is declared held (``PreviewConfig.held_objects``).
Why off its support: an object the fingers close on where it stands, or that the hand lets go of on a
table, is not being carried; judging it would refuse the grasp (the fingertips draw it in) and the
release (it leaves the hand) that every pick and place makes. The fingertips are the distal phalanges of the contact outputs'
default labels (:data:`shadow_twin.simulation.contact_sensing.DEFAULT_SENSORS`, the palm not counted); a
fingertip touches an object when MuJoCo's collision detection (``mj_kinematics`` + ``mj_collision`` on
a copy of the preview model whose geoms have a margin of :data:`TOUCH_MARGIN`) finds their geoms
closer than that: a fingertip resting on the object is not lost to the flicker of a contact 0.01 mm
deep one step and 0.01 mm off the next.

**Lost.** Through the predicted states, every ``contact_period`` s as the contact check, the object's
position relative to the fingertips that held it at the start (their mean position, in the palm's
orientation: body ``rh_palm``; the palm's origin for a declared-held object no fingertip touched) is
compared with the same at the start: its *slide*, m. Measured against the holding fingertips, not the
palm, so that a grasp still closing, whose fingertips draw the object towards the palm, does not slide
it; a hand turning with the object in it does not either. The object *leaves the hand* at the first
checked state in which fewer than ``grasp_min_fingertips`` fingertips touch it (a declared-held object
that nothing touched at the start leaves only by sliding). The goal fails (:class:`GraspLoss`) at the
first state where a held object has slid more than ``grasp_slide_limit`` (10 mm) or has left the hand,
whichever comes first; the reason names the object, its slide and the time, and where it is then
(world frame, m).

**Off by default** (``grasp.slide_limit`` 0): what slide is too much is the lab's call. Calibrated, the
preview's verdict agrees with the mock hardware's outcome in 97 % of 100 random transports of a held can
at 10 mm (``benchmarks/grasp_preview.py``, 29 Nov), but the demo's pick (``shadow-twin demo --cell``)
holds its can while it sinks 15-25 mm into the grip as the lift takes its weight: a 10 mm limit would
refuse it. A lab turns the check on with its own limit.

Cost: one collision pass at the start, and per checked state one ``mj_kinematics`` and, while an
object is held, one ``mj_collision``; nothing without a held object.
A window of a running goal (the preview's watch) judges its own start: an object already lost is not
held there, and the slide counts from the window's start.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.cell.names import HAND_ROOT
from shadow_twin.model.scene import object_kinds
from shadow_twin.model.scene.names import FREE
from shadow_twin.simulation.contact_sensing import DEFAULT_SENSORS
from shadow_twin.simulation.preview.config import PreviewConfig

#: The body whose orientation the slide is measured in.
PALM = 'rh_palm'
#: m: two geoms closer than this touch (module doc).
TOUCH_MARGIN = 0.002


def hand_bodies(model: mujoco.MjModel) -> set[int]:
    """Body ids of the hand: :data:`~shadow_twin.model.cell.names.HAND_ROOT` and every body below it
    (empty without it)."""
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, HAND_ROOT)
    out = set()
    for body in range(model.nbody) if root >= 0 else ():
        b = body
        while b > 0 and b != root:
            b = int(model.body_parentid[b])
        if b == root:
            out.add(body)
    return out


def free_objects(model: mujoco.MjModel) -> dict[str, int]:
    """{name: body id} of the model's free scene objects, in the order they were added."""
    return {n: model.body(n).id for n, kind in object_kinds(model).items() if kind == FREE}


@dataclass(frozen=True)
class GraspLoss:
    """The first held object predicted lost: ``name``; ``slide`` m, its slide against the fingertips that
    held it then (module doc);
    ``time`` s from the goal's start; ``left``: True when it left the hand (too few fingertips), False
    when it slid past the limit in it; ``place`` (3,) m, where it is then (world frame)."""

    name: str
    slide: float
    time: float
    left: bool
    place: tuple[float, float, float]

    def message(self, limit: float) -> str:
        """One line: "'can' slides 14 mm and leaves the hand at t = 2.300 s (at x, y, z m)" or "... slides
        14 mm in the hand by t = ... (limit 10 mm)"; ``limit`` m."""
        where = ', '.join(f'{v:.3f}' for v in self.place)
        if self.left:
            return (f"'{self.name}' slides {self.slide * 1000:.0f} mm and leaves the hand at t = {self.time:.3f} s "
                    f'(at {where} m)')
        return (f"'{self.name}' slides {self.slide * 1000:.0f} mm in the hand by t = {self.time:.3f} s (limit "
                f'{limit * 1000:.0f} mm; at {where} m)')


class GraspWatch:
    """Finds the first held object lost in predicted states (module doc).

    Args:
        model: the preview model (compiled; copied, not changed).
        config: ``grasp_slide_limit``, ``grasp_min_fingertips``, ``held_objects``, ``contact_period``.
    Raises:
        ConfigError: a declared-held object that is not a free scene object of the model.
    """

    def __init__(self, model: mujoco.MjModel, config: PreviewConfig) -> None:
        self.config = config
        self.model = copy.copy(model)
        self.model.geom_margin[:] = np.maximum(model.geom_margin, TOUCH_MARGIN)
        #: {object name: body id} of the free scene objects.
        self.objects = free_objects(model)
        unknown = sorted(set(config.held_objects) - set(self.objects))
        if unknown:
            raise ConfigError(f'preview grasp.held: {unknown} are not free objects of the scene; free objects: '
                              f'{list(self.objects)}')
        self.palm = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, PALM)
        tips = [body for label, bodies in DEFAULT_SENSORS.items() if label != 'palm' for body in bodies]
        self.tip_bodies = np.array([i for i in (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in tips)
                                    if i >= 0], dtype=int)
        #: Body ids of the hand (at and below its root): what may touch a carried object.
        self.hand = np.array(sorted(hand_bodies(model)), dtype=int)
        self._scratch = threading.local()

    @property
    def active(self) -> bool:
        """True when the check is on (``grasp_slide_limit`` > 0) and the model has a palm, fingertips and a
        free object: something can be held."""
        return self.config.grasp_slide_limit > 0 and bool(self.objects) and self.palm >= 0 and len(self.tip_bodies) > 0

    def _data(self) -> mujoco.MjData:
        data = getattr(self._scratch, 'data', None)
        if data is None:
            data = self._scratch.data = mujoco.MjData(self.model)
        return data

    def _tips(self, data: mujoco.MjData) -> dict[int, list[int]]:
        """{object body: the fingertip bodies touching it} after ``mj_collision`` on ``data``."""
        n = data.ncon
        bodies = self.model.geom_bodyid
        b1, b2 = bodies[data.contact.geom1[:n]], bodies[data.contact.geom2[:n]]
        out = {}
        for body in self.objects.values():
            tips = set(b2[(b1 == body) & np.isin(b2, self.tip_bodies)]) | set(b1[(b2 == body) & np.isin(b1, self.tip_bodies)])
            out[body] = sorted(int(t) for t in tips)
        return out

    def _supported(self, data: mujoco.MjData, body: int) -> bool:
        """True when something other than the hand touches ``body`` (after ``mj_collision``)."""
        n = data.ncon
        b1, b2 = self.model.geom_bodyid[data.contact.geom1[:n]], self.model.geom_bodyid[data.contact.geom2[:n]]
        others = np.concatenate([b2[b1 == body], b1[b2 == body]])
        return bool(np.any(~np.isin(others, self.hand)))

    def _touching(self, data: mujoco.MjData) -> dict[int, int]:
        """{object body: how many fingertips touch it} after ``mj_collision`` on ``data``."""
        return {body: len(tips) for body, tips in self._tips(data).items()}

    def _relative(self, data: mujoco.MjData, body: int, tips: list[int]) -> np.ndarray:
        """(3,) the body's position from the mean of the ``tips`` bodies (the palm's origin without any), in
        the palm's orientation, m (after ``mj_kinematics``)."""
        anchor = data.xpos[tips].mean(axis=0) if tips else data.xpos[self.palm]
        return data.xmat[self.palm].reshape(3, 3).T @ (data.xpos[body] - anchor)

    def fingertips(self, qpos: np.ndarray) -> dict[str, int]:
        """{free object: how many fingertips touch it} in the state ``qpos`` ((nq,))."""
        if not self.active:
            return {}
        data = self._data()
        data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, data)
        counts = self._touching_now(data)
        return {n: counts[b] for n, b in self.objects.items()}

    def held(self, qpos: np.ndarray) -> list[str]:
        """The objects held in the state ``qpos`` ((nq,)): touched by ``grasp_min_fingertips`` or more
        fingertips and by nothing but the hand, or declared held (module doc)."""
        if not self.active:
            return []
        data = self._data()
        self._collide(data, qpos)
        return self._held(data)

    def _collide(self, data: mujoco.MjData, qpos: np.ndarray) -> None:
        """``data`` in the state ``qpos``: kinematics and collision."""
        data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, data)
        mujoco.mj_collision(self.model, data)

    def _held(self, data: mujoco.MjData) -> list[str]:
        """:meth:`held` of ``data`` after :meth:`_collide`."""
        touching = self._touching(data)
        return [n for n, body in self.objects.items() if n in self.config.held_objects
                or (touching[body] >= self.config.grasp_min_fingertips and not self._supported(data, body))]

    def judge(self, times: np.ndarray, qpos: np.ndarray) -> tuple[dict[str, float], GraspLoss | None]:
        """({held object: its largest slide, m, up to the loss or the end}, the first held object lost or
        None) of the states ``qpos`` ((N, nq)) at ``times`` ((N,) s), checked every ``contact_period`` s
        (and the last state); held: in ``qpos[0]`` (module doc)."""
        if len(times) == 0 or not self.active:
            return {}, None
        data, config = self._data(), self.config
        self._collide(data, qpos[0])
        held = self._held(data)
        if not held:
            return {}, None
        bodies = {n: self.objects[n] for n in held}
        holding = self._tips(data)
        tips = {n: holding[b] if len(holding[b]) >= config.grasp_min_fingertips else [] for n, b in bodies.items()}
        start = {n: self._relative(data, b, tips[n]) for n, b in bodies.items()}
        touched = {n: bool(tips[n]) for n in bodies}
        slides = dict.fromkeys(bodies, 0.0)
        dt = float(times[1] - times[0]) if len(times) > 1 else 1.0
        stride = max(1, int(round(config.contact_period / dt)))
        rows = list(range(stride - 1, len(times), stride))
        if rows[-1] != len(times) - 1:
            rows.append(len(times) - 1)
        for row in rows:
            data.qpos[:] = qpos[row]
            mujoco.mj_kinematics(self.model, data)
            count = self._touching_now(data) if any(touched.values()) else {}
            for name, body in bodies.items():
                slide = float(np.linalg.norm(self._relative(data, body, tips[name]) - start[name]))
                slides[name] = max(slides[name], slide)
                left = touched[name] and count[body] < config.grasp_min_fingertips
                if left or slide > config.grasp_slide_limit:
                    return slides, GraspLoss(name, slide, float(times[row]), bool(left),
                                             tuple(float(v) for v in data.xpos[body]))
        return slides, None

    def _touching_now(self, data: mujoco.MjData) -> dict[int, int]:
        """:meth:`_touching` after running ``mj_collision`` on ``data`` (kinematics done)."""
        mujoco.mj_collision(self.model, data)
        return self._touching(data)
