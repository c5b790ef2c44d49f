"""Grasp preview: does a held object stay in the hand through a predicted run (ROS-free; issue 37).

**Held.** A free scene object (:func:`shadow_twin.model.scene.object_kinds`) is held at the start of a
run when at least ``grasp_min_fingertips`` (2) of the hand's fingertips touch it, or when it is declared
held (``PreviewConfig.held_objects``). The fingertips are the distal phalanges of the contact outputs'
default labels (:data:`shadow_twin.simulation.contact_sensing.DEFAULT_SENSORS`, the palm not counted); a
fingertip touches an object when MuJoCo's collision detection (``mj_kinematics`` + ``mj_collision`` on
the preview model, the dynamics' own contact settings) gives a contact between one of its geoms and
the object's.

**Lost.** Through the predicted states, every ``contact_period`` s as the contact check, the object's
position in the palm's frame (body ``rh_palm``) is compared with its position there at the start: its
*slide*, m. The object *leaves the hand* at the first checked state in which fewer than
``grasp_min_fingertips`` fingertips touch it (a declared-held object that nothing touched at the start
leaves only by sliding). The goal fails (:class:`GraspLoss`) at the first state where a held object has
slid more than ``grasp_slide_limit`` (10 mm) or has left the hand, whichever comes first; the reason
names the object, its slide and the time, and where it is then (world frame, m).

Cost: one collision pass at the start, and per checked state one ``mj_kinematics`` and, while an
object is held, one ``mj_collision``; nothing without a held object.
A window of a running goal (the preview's watch) judges its own start: an object already lost is not
held there, and the slide counts from the window's start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.scene import object_kinds
from shadow_twin.model.scene.names import FREE
from shadow_twin.simulation.contact_sensing import DEFAULT_SENSORS
from shadow_twin.simulation.preview.config import PreviewConfig

#: The body whose frame the slide is measured in.
PALM = 'rh_palm'


@dataclass(frozen=True)
class GraspLoss:
    """The first held object predicted lost: ``name``; ``slide`` m, its slide in the palm's frame then;
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
        model: the preview model (compiled; only read).
        config: ``grasp_slide_limit``, ``grasp_min_fingertips``, ``held_objects``, ``contact_period``.
    Raises:
        ConfigError: a declared-held object that is not a free scene object of the model.
    """

    def __init__(self, model: mujoco.MjModel, config: PreviewConfig) -> None:
        self.model, self.config = model, config
        free = [n for n, kind in object_kinds(model).items() if kind == FREE]
        unknown = sorted(set(config.held_objects) - set(free))
        if unknown:
            raise ConfigError(f'preview grasp.held: {unknown} are not free objects of the scene; free objects: {free}')
        #: {object name: body id} of the free scene objects.
        self.objects = {n: model.body(n).id for n in free}
        self.palm = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, PALM)
        tips = [body for label, bodies in DEFAULT_SENSORS.items() if label != 'palm' for body in bodies]
        self.tip_bodies = np.array([i for i in (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in tips)
                                    if i >= 0], dtype=int)
        self._scratch = threading.local()

    @property
    def active(self) -> bool:
        """True when the model has a palm, fingertips and a free object: something can be held."""
        return bool(self.objects) and self.palm >= 0 and len(self.tip_bodies) > 0

    def _data(self) -> mujoco.MjData:
        data = getattr(self._scratch, 'data', None)
        if data is None:
            data = self._scratch.data = mujoco.MjData(self.model)
        return data

    def _touching(self, data: mujoco.MjData) -> dict[int, int]:
        """{object body: fingertips touching it} after ``mj_collision`` on ``data``."""
        n = data.ncon
        bodies = self.model.geom_bodyid
        b1, b2 = bodies[data.contact.geom1[:n]], bodies[data.contact.geom2[:n]]
        out = {}
        for body in self.objects.values():
            tips = set(b2[(b1 == body) & np.isin(b2, self.tip_bodies)]) | set(b1[(b2 == body) & np.isin(b1, self.tip_bodies)])
            out[body] = len(tips)
        return out

    def _in_palm(self, data: mujoco.MjData, body: int) -> np.ndarray:
        """(3,) the body's position in the palm's frame, m (after ``mj_kinematics``)."""
        return data.xmat[self.palm].reshape(3, 3).T @ (data.xpos[body] - data.xpos[self.palm])

    def held(self, qpos: np.ndarray) -> list[str]:
        """The objects held in the state ``qpos`` ((nq,)): touched by ``grasp_min_fingertips`` or more
        fingertips, or declared held (module doc)."""
        if not self.active:
            return []
        data = self._data()
        data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, data)
        mujoco.mj_collision(self.model, data)
        touching = self._touching(data)
        return [n for n, body in self.objects.items()
                if n in self.config.held_objects or touching[body] >= self.config.grasp_min_fingertips]

    def first_loss(self, times: np.ndarray, qpos: np.ndarray) -> GraspLoss | None:
        """The first held object lost in the states ``qpos`` ((N, nq)) at ``times`` ((N,) s), checked
        every ``contact_period`` s (and the last state); held: in ``qpos[0]``. None when none is lost."""
        return self.judge(times, qpos)[1]

    def judge(self, times: np.ndarray, qpos: np.ndarray) -> tuple[dict[str, float], GraspLoss | None]:
        """({held object: its largest slide, m, up to the loss or the end}, the first loss or None) of the
        states ``qpos`` ((N, nq)) at ``times`` ((N,) s), as :meth:`first_loss`."""
        if len(times) == 0 or not self.active:
            return {}, None
        held = self.held(qpos[0])
        if not held:
            return {}, None
        data, config = self._data(), self.config
        bodies = {n: self.objects[n] for n in held}
        data.qpos[:] = qpos[0]
        mujoco.mj_kinematics(self.model, data)
        start = {n: self._in_palm(data, b) for n, b in bodies.items()}
        touched = {n: n not in config.held_objects or self._touching_now(data)[b] >= config.grasp_min_fingertips
                   for n, b in bodies.items()}
        slides = dict.fromkeys(bodies, 0.0)
        dt = float(times[1] - times[0]) if len(times) > 1 else 1.0
        stride = max(1, int(round(config.contact_period / dt)))
        rows = list(range(stride - 1, len(times), stride))
        if rows[-1] != len(times) - 1:
            rows.append(len(times) - 1)
        for row in rows:
            data.qpos[:] = qpos[row]
            mujoco.mj_kinematics(self.model, data)
            tips = self._touching_now(data) if any(touched.values()) else {}
            for name, body in bodies.items():
                slide = float(np.linalg.norm(self._in_palm(data, body) - start[name]))
                slides[name] = max(slides[name], slide)
                left = touched[name] and tips[body] < config.grasp_min_fingertips
                if left or slide > config.grasp_slide_limit:
                    return slides, GraspLoss(name, slide, float(times[row]), bool(left),
                                             tuple(float(v) for v in data.xpos[body]))
        return slides, None

    def _touching_now(self, data: mujoco.MjData) -> dict[int, int]:
        """:meth:`_touching` after running ``mj_collision`` on ``data`` (kinematics done)."""
        mujoco.mj_collision(self.model, data)
        return self._touching(data)
