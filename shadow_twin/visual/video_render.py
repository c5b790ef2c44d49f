"""One video frame: the sim's configuration drawn solid as MuJoCo draws it, and the real robot's drawn into the
same scene as a translucent ghost whose every link is coloured by its sim-real error (:class:`ErrorScale`).

The ghost's geoms are drawn :data:`GHOST_INFLATE` times their size (a tint around the sim's where they coincide).
The two configurations are two :class:`mujoco.MjData` of one model (:class:`RobotConfiguration`: joint states and
the base's planar pose, then kinematics; no physics is stepped). The ghost holds the geoms of the *linked* bodies
only: those that a joint of the motion (or the base's free joint, when base poses are given) moves; the rest
(a fixed forearm, a floor, a scene's objects) is the same in both and drawn once. A link's error is
:func:`link_errors`: the distance between the body's centres of mass in sim and real.

Rendering is offscreen (:mod:`.video_gl`: EGL, or OSMesa). Units: m, rad, px; images (H, W, 3) uint8 RGB, top row
first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.configuration import RobotConfiguration, link_errors
from shadow_twin.visual.geometry import visible_geoms
from shadow_twin.visual.video_gl import gl_context

#: deg: the free camera's default azimuth and elevation (the hand: its palm side, fingers curling towards it).
DEFAULT_AZIMUTH, DEFAULT_ELEVATION = 145.0, -15.0
#: The free camera's default distance, in radii of the linked bodies' bounding sphere (the view fits them).
FIT_DISTANCE = 3.0
#: The ghost's geoms are drawn this much larger than the sim's: where the two coincide (no error) the ghost
#: wraps the sim's surface instead of flickering through it.
GHOST_INFLATE = 1.03


@dataclass(frozen=True)
class CameraView:
    """Where a video looks from: a camera of the model (``name``), or a free camera at ``azimuth`` and
    ``elevation`` (deg) around ``lookat`` ((3,) m; None: the linked bodies' centre) at ``distance`` (m; None:
    fitted to the linked bodies' extent)."""

    name: str | None = None
    azimuth: float = DEFAULT_AZIMUTH
    elevation: float = DEFAULT_ELEVATION
    distance: float | None = None
    lookat: tuple[float, float, float] | None = None

    @classmethod
    def parse(cls, text: str | None) -> 'CameraView':
        """``None`` or '' (the default view), ``AZ,EL`` or ``AZ,EL,DIST`` (deg, deg, m), or a camera's name.
        Raises ConfigError for numbers that are not finite or a distance that is not positive."""
        if not text:
            return cls()
        parts = [p.strip() for p in text.split(',')]
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            if len(parts) > 1:
                raise ConfigError(f'camera {text!r}: expected AZ,EL[,DIST] (deg, deg, m) or a camera name') from None
            return cls(name=text)
        if len(numbers) not in (2, 3) or not all(np.isfinite(numbers)) or (len(numbers) == 3 and numbers[2] <= 0):
            raise ConfigError(f'camera {text!r}: expected AZ,EL[,DIST]: finite degrees and a distance > 0 m')
        return cls(azimuth=numbers[0], elevation=numbers[1], distance=numbers[2] if len(numbers) == 3 else None)


def linked_bodies(model: mujoco.MjModel, joint_map: JointNameMap | None, joints: Sequence[str],
                  base: bool = False) -> np.ndarray:
    """Ids (sorted) of the bodies a motion moves: those below a joint named in ``joints`` (ROS names, mapped
    by ``joint_map``) or, with ``base``, below the base's free joint (:class:`RobotConfiguration`)."""
    joint_map = joint_map or JointNameMap()
    moved = set()
    for name in joints:
        joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint_map.to_mjcf(name))
        if joint >= 0:
            moved.add(int(model.jnt_bodyid[joint]))
    if base:
        moving_base = RobotConfiguration(model, joint_map).base
        if moving_base is not None:
            moved.add(int(model.jnt_bodyid[moving_base.free_joint]))
    linked = [b for b in range(1, model.nbody) if _ancestors(model, b) & moved]
    return np.array(linked, dtype=int)


def _ancestors(model: mujoco.MjModel, body: int) -> set[int]:
    """``body`` and every body above it but the world."""
    out = set()
    while body > 0:
        out.add(body)
        body = int(model.body_parentid[body])
    return out


class GhostRenderer:
    """Draws frames of sim (solid) and real (ghost) configurations of ``model``.

    Args:
        model: the model both are drawn with (the sim's; its offscreen buffer is enlarged on this object's own
            copy when smaller than the frame).
        width, height: the frame, px (>= 16 each).
        joints: the ROS joint names the frames set (their bodies and those below are the ghost's links).
        joint_map: ROS -> MJCF joint names (None: identity).
        base: frames set the base's planar pose too (the base's bodies are links).
        camera: the view (None: :class:`CameraView`'s default, fitted by :meth:`fit_camera`).
        scale: the ghost's colours.
    Attributes:
        links: (L,) body ids of the ghost's links; link_names: their names.
    Raises:
        ConfigError: a size under 16 px, a camera name the model lacks, no linked body.
        RenderingUnavailable: no OpenGL backend (:mod:`.video_gl`).
    """

    def __init__(self, model: mujoco.MjModel, width: int, height: int, joints: Sequence[str],
                 joint_map: JointNameMap | None = None, base: bool = False, camera: CameraView | None = None,
                 scale: ErrorScale | None = None) -> None:
        if width < 16 or height < 16:
            raise ConfigError(f'frame size {width}x{height} px: each side must be at least 16 px')
        self.model = model = _with_buffer(model, width, height)
        self.width, self.height = int(width), int(height)
        self.scale = scale or ErrorScale()
        self.view = camera or CameraView()
        self.configuration = RobotConfiguration(model, joint_map)
        self.links = linked_bodies(model, joint_map, joints, base)
        if not self.links.size:
            raise ConfigError(f'none of the joints {list(joints)[:5]} moves a body of the model')
        self.link_names = [model.body(b).name or f'body{b}' for b in self.links]
        self._link_of_body = np.full(model.nbody, -1)
        self._link_of_body[self.links] = np.arange(self.links.size)
        self.sim, self.real = mujoco.MjData(model), mujoco.MjData(model)
        self.camera = self._camera()
        self.option, self.perturb = mujoco.MjvOption(), mujoco.MjvPerturb()
        self.scene = mujoco.MjvScene(model, maxgeom=2 * len(visible_geoms(model)) + 100)
        self._gl = gl_context(self.width, self.height)
        self._gl.make_current()
        self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        self._rect = mujoco.MjrRect(0, 0, self.width, self.height)
        self._pixels = np.empty((self.height, self.width, 3), dtype=np.uint8)

    def _camera(self) -> mujoco.MjvCamera:
        camera = mujoco.MjvCamera()
        if self.view.name is not None:
            index = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, self.view.name)
            if index < 0:
                names = [self.model.camera(c).name for c in range(self.model.ncam)]
                raise ConfigError(f'camera {self.view.name!r}: the model has no such camera (its cameras: '
                                  f'{names or "none"}; or give AZ,EL[,DIST])')
            camera.type, camera.fixedcamid = mujoco.mjtCamera.mjCAMERA_FIXED, index
            return camera
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        camera.azimuth, camera.elevation = self.view.azimuth, self.view.elevation
        return camera

    def set(self, sim: Mapping[str, float], real: Mapping[str, float],
            sim_base: Sequence[float] | None = None, real_base: Sequence[float] | None = None) -> np.ndarray:
        """Put one instant's configurations ({ROS joint: rad or m}; base (x m, y m, yaw rad) or None) into the
        sim's and the real data; returns (L,) each link's error, m."""
        self.configuration.apply(self.sim, sim, None if sim_base is None else tuple(sim_base))
        self.configuration.apply(self.real, real, None if real_base is None else tuple(real_base))
        mujoco.mj_comPos(self.model, self.sim)        # the model's cameras and lights move with the sim (tracking
        mujoco.mj_camlight(self.model, self.sim)      # ones need the centres of mass): the scene is the sim's
        return link_errors(self.sim, self.real, self.links)

    def fit_camera(self, points: np.ndarray) -> None:
        """Aim the free camera (unless the view gives them) at the centre of ``points`` ((N, 3) m: the links'
        positions over the video) from far enough to see them all; a model camera is left as it is."""
        if self.view.name is not None:
            return
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        low, high = points.min(axis=0), points.max(axis=0)
        centre = (low + high) / 2 if self.view.lookat is None else np.asarray(self.view.lookat, dtype=float)
        radius = max(float(np.linalg.norm(high - low)) / 2, 0.05)
        self.camera.lookat[:] = centre
        self.camera.distance = self.view.distance or FIT_DISTANCE * radius

    def link_positions(self) -> np.ndarray:
        """(2 L, 3) m: the links' origins in the sim's and the real data (after :meth:`set`)."""
        return np.vstack([self.sim.xpos[self.links], self.real.xpos[self.links]])

    def pixels(self, points: np.ndarray) -> np.ndarray:
        """(N, 2) px (x right, y down from the frame's top-left corner) where ``points`` ((N, 3) m, world) appear in
        the last :meth:`render`'s frame (NaN for a point behind the camera)."""
        camera = mujoco.mjv_averageCamera(self.scene.camera[0], self.scene.camera[1])   # mono: the eyes' mean
        forward, up = np.array(camera.forward), np.array(camera.up)
        relative = np.asarray(points, dtype=float).reshape(-1, 3) - np.array(camera.pos)
        depth = relative @ forward
        depth = np.where(depth > 0, depth, np.nan)
        x = relative @ np.cross(forward, up) / depth * camera.frustum_near
        y = relative @ up / depth * camera.frustum_near
        height = camera.frustum_top - camera.frustum_bottom
        half_width = 0.5 * self.width / self.height * height        # as mjr_render sets the frustum
        column = (x - camera.frustum_center + half_width) / (2 * half_width) * self.width
        row = (camera.frustum_top - y) / height * self.height
        return np.stack([column, row], axis=1)

    def render(self, errors: np.ndarray) -> np.ndarray:
        """(H, W, 3) uint8: the configurations of the last :meth:`set`, the ghost's links coloured by
        ``errors`` ((L,) m). The array is reused by the next call: copy it to keep it."""
        model, scene = self.model, self.scene
        mujoco.mjv_updateScene(model, self.sim, self.option, self.perturb, self.camera,
                               mujoco.mjtCatBit.mjCAT_ALL, scene)
        first = scene.ngeom
        mujoco.mjv_addGeoms(model, self.real, self.option, self.perturb, mujoco.mjtCatBit.mjCAT_DYNAMIC, scene)
        colours = self.scale.rgba(errors)
        for index in range(first, scene.ngeom):
            geom = scene.geoms[index]
            link = self._link_of_body[model.geom_bodyid[geom.objid]] if geom.objtype == mujoco.mjtObj.mjOBJ_GEOM \
                else -1
            geom.rgba[:] = colours[link] if link >= 0 else (0.0, 0.0, 0.0, 0.0)   # not a link: not drawn
            geom.size[:] = geom.size * GHOST_INFLATE
            geom.emission = 0.3
        self._gl.make_current()
        mujoco.mjr_render(self._rect, scene, self._context)
        mujoco.mjr_readPixels(self._pixels, None, self._rect, self._context)
        self._pixels[:] = self._pixels[::-1]
        return self._pixels

    def close(self) -> None:
        """Free the GL resources (idempotent)."""
        if self._context is not None:
            self._gl.make_current()
            self._context.free()
            self._context = None
            self._gl.free()

    def __enter__(self) -> 'GhostRenderer':
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _with_buffer(model: mujoco.MjModel, width: int, height: int) -> mujoco.MjModel:
    """``model``, or a copy whose offscreen buffer holds ``width`` x ``height`` px."""
    glob = model.vis.global_
    if glob.offwidth >= width and glob.offheight >= height:
        return model
    model = mujoco.MjModel.__copy__(model)
    model.vis.global_.offwidth, model.vis.global_.offheight = max(glob.offwidth, width), max(glob.offheight, height)
    return model
