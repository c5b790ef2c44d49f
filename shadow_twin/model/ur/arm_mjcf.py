"""The MJCF text of a UR arm from its description's figures (:func:`generate_arm_xml`).

Frames from the URDF macro's joint origins, masses, centres of mass and inertia tensors from
``physical_parameters.yaml``, limits from ``joint_limits.yaml`` (:mod:`shadow_twin.model.ur.description`),
geometry scaled from the UR5's by the type's DH lengths; the generated file's header
(:data:`_HEADER`) names the sources and how each figure is derived. The public entry points are
in :mod:`shadow_twin.model.ur.arm`.
"""

from __future__ import annotations

import math
import textwrap

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.cell.config import rpy_to_quat
from shadow_twin.model.ur.description import JOINTS, LINKS, ArmDescription

#: The type shipped as a built-in model (``builtin/ur5.xml``), the default arm.
BUILTIN_TYPE = 'ur5'
#: Height of the standalone arm's base_link (m): the cell's mount height (MiR250 top 0.352 + cabinet 0.40).
STAND_HEIGHT = 0.752
#: Joint dynamics defaults of every type: armature kg m^2, damping N m s/rad, frictionloss N m (see the header).
JOINT_DYNAMICS = {'armature': 0.1, 'damping': 0.1, 'frictionloss': 0.1}
#: The UR5's lengths (config/ur5, m): the reference of the geometry rule (each figure scales by the
#: type's length over the UR5's; radii by sqrt of the upper arm's length ratio, key 'r').
REFERENCE = {'d1': 0.089159, 'a2': -0.425, 'a3': -0.39225, 'd4': 0.10915, 'd5': 0.09465, 'd6': 0.0823,
             'shoulder_offset': 0.13585, 'elbow_offset': 0.0165}
#: The arm's outline for the UR5: (body, geom name, type, size, pos or fromto, material suffix); a
#: number paired with a key scales by that key's ratio (the geometry rule); a plain number stays.
GEOMETRY = (
    ('base_link', 'base_link_geom', 'cylinder', ((0.075, 'r'), (0.043, 'd1')), ('pos', (0, 0, (0.043, 'd1'))),
     'grey'),
    ('shoulder_link', 'shoulder_link_geom', 'cylinder', ((0.06, 'r'), (0.075, 'r')), None, 'blue'),
    ('upper_arm_link', 'upper_arm_joint_geom', 'cylinder', ((0.06, 'r'), (0.07, 'shoulder_offset')),
     ('pos', (0, 0, (0.07, 'shoulder_offset'))), 'blue'),
    ('upper_arm_link', 'upper_arm_tube', 'capsule', ((0.05, 'r'),),
     ('fromto', ((-0.06, 'r'), 0, (0.136, 'shoulder_offset'), (-0.365, 'a2'), 0, (0.136, 'shoulder_offset'))),
     'grey'),
    ('forearm_link', 'elbow_geom', 'cylinder', ((0.05, 'r'), (0.07, 'r')), ('pos', (0, 0, (0.08, 'shoulder_offset'))),
     'blue'),
    ('forearm_link', 'forearm_tube', 'capsule', ((0.04, 'r'),),
     ('fromto', ((-0.05, 'r'), 0, (0.016, 'elbow_offset'), (-0.35, 'a3'), 0, (0.016, 'elbow_offset'))), 'grey'),
    ('wrist_1_link', 'wrist_1_geom', 'cylinder', ((0.0375, 'r'), (0.05, 'd4')), ('pos', (0, 0, (-0.045, 'd4'))),
     'blue'),
    ('wrist_2_link', 'wrist_2_geom', 'cylinder', ((0.0375, 'r'), (0.045, 'd5')), ('pos', (0, 0, (-0.035, 'd5'))),
     'blue'),
    ('wrist_3_link', 'wrist_3_geom', 'cylinder', ((0.0375, 'r'), (0.01725, 'd6')), ('pos', (0, 0, (-0.01725, 'd6'))),
     'grey'),
)
#: Snapping of the description's float noise: angles this close to a multiple of pi/2 (rad) and
#: lengths this close to 0 (m) are taken as exact (UR's files hold e.g. roll 1.570796327, z -1.9e-11).
ANGLE_SNAP, LENGTH_SNAP = 1e-8, 1e-9


def _snap_angle(value: float) -> float:
    quarter = round(value / (math.pi / 2))
    return quarter * (math.pi / 2) if abs(value - quarter * math.pi / 2) < ANGLE_SNAP else value


def _snap_length(value: float) -> float:
    return 0.0 if abs(value) < LENGTH_SNAP else value


def _fmt(value: float, digits: int = 10) -> str:
    text = f'{float(value):.{digits}g}'
    return '0' if float(text) == 0 else text


def _vec(values, digits: int = 10) -> str:
    return ' '.join(_fmt(v, digits) for v in values)


def _quat_mul(a, b) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _quat_text(quat) -> str:
    """w x y z to 8 decimals, the sign making the first non-zero component positive."""
    quat = np.round(np.asarray(quat, dtype=float), 8)
    first = next((v for v in quat if v != 0), 1.0)
    return _vec(quat * (1 if first > 0 else -1))


def _rot(rpy) -> np.ndarray:
    """Rotation matrix of URDF rpy: Rz(y) Ry(p) Rx(r)."""
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, rpy_to_quat(rpy))
    return out.reshape(3, 3)


def _ratios(desc: ArmDescription) -> dict[str, float]:
    """The geometry rule's scale per key: the type's length over the UR5's; 'r' = sqrt of a2's ratio."""
    lengths = {**desc.dh, **desc.offsets}
    ratios = {key: lengths[key] / ref for key, ref in REFERENCE.items()}
    ratios['r'] = math.sqrt(ratios['a2'])
    return ratios


def _scaled(values, ratios: dict[str, float]) -> list[float]:
    return [v[0] * ratios[v[1]] if isinstance(v, tuple) else float(v) for v in values]


def _inertial(link, indent: str) -> str:
    """``<inertial>`` of a link: the description's tensor turned into the link frame (R I R^T)."""
    ixx, iyy, izz, ixy, ixz, iyz = link.tensor
    tensor = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    rot = _rot([_snap_angle(a) for a in link.rotation])
    full = rot @ tensor @ rot.T
    full[np.abs(full) < 1e-12 * np.trace(full)] = 0.0
    values = (full[0, 0], full[1, 1], full[2, 2], full[0, 1], full[0, 2], full[1, 2])
    return (f'{indent}<inertial pos="{_vec(link.com)}" mass="{_fmt(link.mass)}" '
            f'fullinertia="{_vec(values)}"/>')


def _geoms(body: str, arm_type: str, ratios: dict[str, float], indent: str) -> list[str]:
    out = []
    for owner, name, kind, size, where, colour in GEOMETRY:
        if owner != body:
            continue
        place = f' {where[0]}="{_vec(_scaled(where[1], ratios), 6)}"' if where else ''
        material = f' material="{arm_type}_blue"' if colour == 'blue' else ''
        out.append(f'{indent}<geom name="{name}" type="{kind}" size="{_vec(_scaled(size, ratios), 6)}"{place}'
                   f'{material}/>')
    return out


def _joint(desc: ArmDescription, joint: str) -> str:
    position = desc.limits[joint].position
    limit = (f'range="{_vec(position)}"' if position is not None else 'limited="false"')
    return f'<joint name="{joint}" {limit}/>'


def _effort_class(arm_type: str, effort: float) -> str:
    return f'{arm_type}_effort{_fmt(effort)}'


def _bodies(desc: ArmDescription, ratios: dict[str, float]) -> list[str]:
    """The body tree from base_link to wrist_3_link with sites, as MJCF lines."""
    t = desc.arm_type
    flip = rpy_to_quat((0.0, 0.0, math.pi))          # base_link -> base_link_inertia and -> base [URDF]
    base_com = (0.0, 0.0, 0.043 * ratios['d1'])
    r, length, mass = desc.base_radius, desc.base_length, desc.base_mass
    base_inertia = (mass * (3 * r * r + length * length) / 12,) * 2 + (mass * r * r / 2,)
    lines = [f'    <body name="base_link" childclass="{t}" pos="0 0 {_fmt(STAND_HEIGHT)}">',
             f'      <!-- {_fmt(mass)} kg [PHY]; no tensor in [PHY]: a uniform solid cylinder r {_fmt(r)} '
             f'L {_fmt(length)} (links.base)',
             '           about z, at the centre of the base geom (see the header) -->',
             f'      <inertial pos="{_vec(base_com)}" mass="{_fmt(mass)}" diaginertia="{_vec(base_inertia)}"/>']
    lines += _geoms('base_link', t, ratios, '      ')
    lines += ['      <!-- UR\'s base frame: base_link rotated rpy (0 0 pi) [URDF]; = DH frame 0 -->',
              f'      <site name="base" quat="{_quat_text(flip)}"/>']
    close = []
    for i, (link, joint) in enumerate(zip(LINKS, JOINTS)):
        indent = '      ' + '  ' * i
        xyz, rpy = desc.origins[link]
        xyz = np.array([_snap_length(v) for v in xyz])
        rpy = [_snap_angle(a) for a in rpy]
        quat = rpy_to_quat(rpy)
        parent = f'{LINKS[i - 1]}_link' if i else 'base_link'
        if i == 0:    # the shoulder joint's parent is base_link_inertia = base_link * rpy(0 0 pi)
            xyz, quat, parent = np.array([-xyz[0], -xyz[1], xyz[2]]), _quat_mul(flip, quat), 'base_link_inertia'
        pos = f' pos="{_vec(xyz)}"' if xyz.any() else ''
        rot = f' quat="{_quat_text(quat)}"' if _quat_text(quat) != '1 0 0 0' else ''
        inertia = desc.links[link]
        lim = desc.limits[joint]
        lines += ['', f'{indent}<!-- {joint}: origin xyz ({_vec(xyz)}) rpy ({_vec(rpy, 8)}) in {parent} [KIN]; '
                  f'{_fmt(lim.effort)} N m, {_fmt(lim.velocity, 6)} rad/s [LIM] -->',
                  f'{indent}<body name="{link}_link"{pos}{rot}>',
                  f'{indent}  <!-- {_fmt(inertia.mass)} kg, com ({_vec(inertia.com)}) [PHY]; tensor [PHY] turned by '
                  f'rpy ({_vec(inertia.rotation, 8)}) -->',
                  _inertial(inertia, indent + '  '),
                  f'{indent}  {_joint(desc, joint)}']
        lines += _geoms(f'{link}_link', t, ratios, indent + '  ')
        close.append(f'{indent}</body>')
    indent = '  ' * (len(LINKS) + 3)
    lines += [f'{indent}<!-- flange = wrist_3_link * rpy (0 -pi/2 -pi/2) [URDF] -->',
              f'{indent}<site name="flange" quat="{_quat_text(rpy_to_quat((0, -math.pi / 2, -math.pi / 2)))}"/>',
              f'{indent}<!-- tool0 = flange * rpy (pi/2 0 pi/2) [URDF] (the product is the identity) -->',
              f'{indent}<site name="tool0" quat="'
              f'{_quat_text(_quat_mul(rpy_to_quat((0, -math.pi / 2, -math.pi / 2)), rpy_to_quat((math.pi / 2, 0, math.pi / 2))))}"/>']
    return lines + close[::-1] + ['    </body>']


_HEADER = """<?xml version="1.0" encoding="utf-8"?>
<!--
  shadow_twin arm model: Universal Robots {TYPE}, MJCF, primitive geometry.

  Generated by shadow_twin/model/ur/arm.py (shadow-twin model, option arm {t}) from the
  figures of Universal Robots' description files for the {TYPE}; it contains no text or
  meshes of Universal Robots' files.

  Sources of the figures (Universal Robots' ROS 2 description, BSD-3-Clause,
  github.com/UniversalRobots/Universal_Robots_ROS2_Description, config/{t}/):
{sources}
    [URDF] urdf/ur_macro.xacro: frames. base_link -> base_link_inertia rpy (0 0 pi)
           (the shoulder_pan_joint's parent); base_link -> base rpy (0 0 pi); each joint's
           origin is that of [KIN]; wrist_3_link -> flange rpy (0 -pi/2 -pi/2); flange ->
           tool0 rpy (pi/2 0 pi/2).

  Frames: every body frame is the URDF link frame of the same name, so centres of
  mass and joint axes (+z of each link) are those of [PHY] and [URDF]. The site
  `base` is UR's base frame (the DH frame 0, the frame of the controller's tool
  pose), `flange` and `tool0` are the URDF frames of those names. With the URDF's
  joint origins, wrist_3_link coincides with the DH frame 6, and
  rpy(0,-pi/2,-pi/2) * rpy(pi/2,0,pi/2) is the identity, so tool0 = DH frame 6
  (test/core/model/test_ur_arms.py checks it against an independent DH chain).
  URDF rpy (r, p, y) means R = Rz(y) Ry(p) Rx(r); the quaternions below are
  computed from it (w x y z, 8 decimals). [KIN]'s float noise is dropped: an angle
  within 1e-8 rad of a multiple of pi/2 is that multiple (roll 1.570796327 is pi/2),
  a length within 1e-9 m of 0 is 0.

  Inertias: each link's is the tensor of [PHY] (about the centre of mass, in the frame
  turned by its `rotation` rpy from the link frame; for some types UR's tensors are
  themselves cylinder approximations, as their file says), written in the link frame
  as fullinertia = R I R^T (ixx iyy izz ixy ixz iyz). The base link has no tensor in
  [PHY]: a uniform solid cylinder of the base mass, radius and length of [PHY]'s
  links.base, axis z: I_xx = I_yy = m (3 r^2 + L^2) / 12, I_zz = m r^2 / 2, its centre
  at the centre of the base geom (UR's URDF puts it at base_link_inertia's origin).
  The base is fixed: its inertia and centre of mass change no motion, only the mass.

  Joint dynamics: UR's URDF has damping 0 and friction 0; the armature {armature} kg m^2
  (reflected rotor inertia through the ~100:1 harmonic drives) is the value of
  MuJoCo Menagerie's UR5e model; damping {damping} N m s/rad and frictionloss {frictionloss} N m are
  small placeholders kept present so that calibration (shadow-twin identify) can address them.

  Actuators are torque motors named like the joints (ros2_control / ur_robot_driver
  joint names; a prefix such as `ra_` is applied when the cell is assembled), gear 1.
  The position servo (PD) is installed by the simulated controller
  (shadow_twin/control/controller.py) from config/controllers/. The effort limits of
  [LIM] are recorded in each motor's forcerange with forcelimited="false": NOT applied,
  because the servo's gains are stiff (d up to 1670 N m s/rad) and MuJoCo's implicitfast
  integrator takes the servo's velocity derivative -d even while its force is clamped,
  so a clamped joint crawls (measured on the UR5: a 0.5 rad move in 1 s reached 0.11 rad
  after 2 s, against 0.5 rad unclamped or with the explicit Euler integrator). They are
  there for the trajectory checks (shadow_twin.model.ur.arm.model_effort_limits), which
  compare the predicted effort with them. The UR's own controller stays far inside
  these limits in normal motion (the UR5's +/-1 rad shoulder pan swing at pi rad/s of
  benchmarks/cell.py needs about 75 N m). The velocity limits have no MJCF attribute;
  they belong to the trajectory checks too (velocity_limits YAML).

  Geometry: capsules and cylinders of roughly the arm's outline: the UR5's figures
  (GEOMETRY in shadow_twin/model/ur/arm.py) scaled for this type. A length along the
  arm scales by this type's DH length or offset over the UR5's (base height d1; upper
  arm tube height shoulder_offset, its end a2; forearm tube height elbow_offset, its
  end a3; wrist 1, 2 and 3 housings d4, d5, d6); radii and joint housings by
  s = sqrt(a2 / a2 of the UR5) = {s}. Arm geoms have contype 2, conaffinity 0: they
  never collide with each other, with the hand or with the mobile base, only with a
  scene geom whose conaffinity has bit 2 (the floor here and in the cell).

  Standalone, the arm's base_link is fixed to the world on a stand.
-->
"""


def _wrapped(tag: str, text: str) -> str:
    return textwrap.fill(text, 88, initial_indent=f'    {tag:<6} ', subsequent_indent=' ' * 11)


def _header(desc: ArmDescription, ratios: dict[str, float]) -> str:
    dh, off, lim = desc.dh, desc.offsets, desc.limits
    kin = ('default_kinematics.yaml: the URDF joint origins (per body below). The DH lengths they imply: '
           + ', '.join(f'{k} {_fmt(v)}' for k, v in dh.items()) + ' m; alpha (pi/2, 0, 0, pi/2, -pi/2, 0)')
    phy = ('physical_parameters.yaml: masses base ' + _fmt(desc.base_mass) + ', '
           + ', '.join(f'{link.replace("_", " ")} {_fmt(desc.links[link].mass)}' for link in LINKS)
           + ' kg; centres of mass and inertia tensors in the URDF link frames (per body below); offsets '
           f'shoulder {_fmt(off["shoulder_offset"])}, elbow {_fmt(off["elbow_offset"])} m; the base\'s '
           f'cylinder (links.base) r {_fmt(desc.base_radius)} L {_fmt(desc.base_length)} m')
    rows = [_wrapped('[KIN]', kin), _wrapped('[PHY]', phy),
            '    [LIM]  joint_limits.yaml: max_effort N m, max_velocity rad/s, position limits rad:']
    for joint in JOINTS:
        position = lim[joint].position
        where = 'none (turns without limit)' if position is None else _vec(position, 7)
        rows.append(f'             {joint:<20} {_fmt(lim[joint].effort):>5} {_fmt(lim[joint].velocity, 6):>8}  {where}')
    return _HEADER.format(TYPE=desc.arm_type.upper(), t=desc.arm_type, sources='\n'.join(rows),
                          s=_fmt(ratios['r'], 6), **{k: _fmt(v) for k, v in JOINT_DYNAMICS.items()})


def generate_arm_xml(desc: ArmDescription) -> str:
    """The standalone MJCF text of ``desc``'s arm (header, defaults, stand, arm, motors); see the module doc."""
    t = desc.arm_type
    ratios = _ratios(desc)
    if not all(math.isfinite(v) and v > 0 for v in ratios.values()):
        raise ConfigError(f'{desc.source}: a DH length or offset has the other sign than the UR5\'s or is 0; '
                          f'the geometry rule needs them all ({", ".join(REFERENCE)})')
    classes: dict[float, list[str]] = {}
    for joint in JOINTS:
        classes.setdefault(desc.limits[joint].effort, []).append(joint)
    defaults = []
    for effort, joints in classes.items():
        defaults += [f'      <!-- [LIM] effort {_fmt(effort)} N m: {", ".join(joints)} -->',
                     f'      <default class="{_effort_class(t, effort)}">',
                     f'        <motor gear="1" forcelimited="false" forcerange="{_vec((-effort, effort))}"/>',
                     '      </default>']
    dyn = ' '.join(f'{k}="{_fmt(v)}"' for k, v in JOINT_DYNAMICS.items())
    stand = STAND_HEIGHT / 2
    lines = [f'<mujoco model="{t}">', '  <compiler angle="radian" autolimits="true"/>', '',
             '  <option timestep="0.002" integrator="implicitfast"/>', '', '  <default>',
             f'    <default class="{t}">', f'      <joint type="hinge" axis="0 0 1" {dyn}/>',
             f'      <geom contype="2" conaffinity="0" condim="3" group="0" material="{t}_grey"/>',
             '      <site group="4" size="0.005" rgba="1 0 0 1"/>', *defaults, '    </default>', '  </default>', '',
             '  <asset>', f'    <material name="{t}_grey" rgba="0.7 0.72 0.75 1"/>',
             f'    <material name="{t}_blue" rgba="0.25 0.45 0.7 1"/>', '  </asset>', '', '  <worldbody>',
             f'    <light name="{t}_light" directional="true" pos="0 0 3" dir="0 0 -1" diffuse="0.8 0.8 0.8" '
             'castshadow="false"/>',
             f'    <geom name="{t}_floor" type="plane" size="2 2 0.05" rgba="0.5 0.55 0.6 1" contype="1" '
             'conaffinity="3"/>', '',
             '    <!-- standalone (the mock UR): on a stand at the cell\'s mount height (MiR250 top 0.352 m +',
             '         cabinet 0.40 m), so that the stretched-out arm (its zero pose) clears the floor; in the',
             '         cell, the arm\'s mount in config/cell.yaml replaces this pose -->',
             f'    <geom name="{t}_stand" type="cylinder" size="{_vec((0.08 * ratios["r"], stand), 6)}" '
             f'pos="0 0 {_fmt(stand)}" rgba="0.35 0.37 0.4 1"', '          contype="0" conaffinity="0"/>',
             *_bodies(desc, ratios), '  </worldbody>', '',
             '  <!-- torque motors named like the joints; effort limits recorded, not applied (see the header) -->',
             '  <actuator>',
             *(f'    <motor name="{j}" joint="{j}" class="{_effort_class(t, desc.limits[j].effort)}"/>'
               for j in JOINTS),
             '  </actuator>', '</mujoco>', '']
    return _header(desc, ratios) + '\n'.join(lines)
