"""Every UR arm type from Universal Robots' description files (shadow_twin/model/ur/arm.py,
ur_description.py), the regenerated built-in ur5.xml, and ``shadow-twin model --arm``.

Tests that read UR's description use the copy in ../shared/reference/ur_description and are
skipped without it; the project itself never needs it for the UR5.
"""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml
from support.poses import pose_error, rot_x, rot_z, site_pose, trans

from shadow_twin.cli import model as model_cli
from shadow_twin.common.errors import ConfigError
from shadow_twin.model.cell.assembly import CellConfig, arm_joint_names, arm_root_name, build_cell_spec, compile_cell
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.model.ur.arm import (UR_TYPES, arm_xml, effort_limits, find_ur_description, model_effort_limits,
                                      write_arm_mjcf)
from shadow_twin.model.ur.description import DESCRIPTION_ENV, JOINTS, LINKS, read_arm_description

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / 'shared' / 'reference' / 'ur_description'
needs_description = pytest.mark.skipif(not (SHARED / 'config' / 'ur5').is_dir(),
                                       reason='no UR description in ../shared/reference/ur_description')

# -- the figures of ur5.xml before it was generated (git HEAD ad56a08), the six link inertias aside --
HEAD_BODIES = ['world', 'base_link', 'shoulder_link', 'upper_arm_link', 'forearm_link', 'wrist_1_link',
               'wrist_2_link', 'wrist_3_link']
S = math.sqrt(0.5)
HEAD = {
    'body_pos': [[0, 0, 0], [0, 0, 0.752], [0, 0, 0.089159], [0, 0, 0], [-0.425, 0, 0], [-0.39225, 0, 0.10915],
                 [0, -0.09465, 0], [0, 0.0823, 0]],
    'body_quat': [[1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [S, S, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [S, S, 0, 0],
                  [S, -S, 0, 0]],
    'body_mass': [0, 4.0, 3.7, 8.393, 2.33, 1.219, 1.219, 0.1879],
    'body_ipos': [[0, 0, 0], [0, 0, 0.043], [0, -0.00193, -0.02561], [-0.2125, 0, 0.11336], [-0.24225, 0, 0.0265],
                  [0, -0.01634, -0.0018], [0, 0.01634, -0.0018], [0, 0, -0.001159]],
    'jnt_range': [[-6.283185, 6.283185]] * 2 + [[-3.141593, 3.141593]] + [[-6.283185, 6.283185]] * 3,
    'jnt_axis': [[0, 0, 1]] * 6,
    'dof_armature': [0.1] * 6, 'dof_damping': [0.1] * 6, 'dof_frictionloss': [0.1] * 6,
    'geom_size': [[2, 2, 0.05], [0.08, 0.376, 0], [0.075, 0.043, 0], [0.06, 0.075, 0], [0.06, 0.07, 0],
                  [0.05, 0.1525, 0], [0.05, 0.07, 0], [0.04, 0.15, 0], [0.0375, 0.05, 0], [0.0375, 0.045, 0],
                  [0.0375, 0.01725, 0]],
    'geom_pos': [[0, 0, 0], [0, 0, 0.376], [0, 0, 0.043], [0, 0, 0], [0, 0, 0.07], [-0.2125, 0, 0.136], [0, 0, 0.08],
                 [-0.2, 0, 0.016], [0, 0, -0.045], [0, 0, -0.035], [0, 0, -0.01725]],
    'geom_quat': [[1, 0, 0, 0]] * 5 + [[S, 0, S, 0], [1, 0, 0, 0], [S, 0, S, 0]] + [[1, 0, 0, 0]] * 3,
    'geom_type': [0, 5, 5, 5, 5, 3, 5, 3, 5, 5, 5],
    'geom_contype': [1, 0] + [2] * 9, 'geom_conaffinity': [3] + [0] * 10,
    'site_pos': [[0, 0, 0]] * 3, 'site_quat': [[0, 0, 0, 1], [0.5, -0.5, -0.5, -0.5], [1, 0, 0, 0]],
}
HEAD_GEOMS = ['ur5_floor', 'ur5_stand', 'base_link_geom', 'shoulder_link_geom', 'upper_arm_joint_geom',
              'upper_arm_tube', 'elbow_geom', 'forearm_tube', 'wrist_1_geom', 'wrist_2_geom', 'wrist_3_geom']


def compiled(xml: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(xml)


def model_arrays(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    """Every numeric array and size of a compiled model (its figures)."""
    out = {}
    for name in dir(model):
        if name.startswith('_'):
            continue
        value = getattr(model, name)
        if isinstance(value, np.ndarray) or isinstance(value, (int, float)):
            out[name] = np.asarray(value)
    return out


def full_inertia(model: mujoco.MjModel, body: int) -> np.ndarray:
    """The body's inertia tensor about its centre of mass in the body frame (kg m^2)."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[body])
    rot = rot.reshape(3, 3)
    return rot @ np.diag(model.body_inertia[body]) @ rot.T


def dh_tool0(q, dh: dict[str, float]) -> np.ndarray:
    """Standard DH chain frame 0 -> frame 6 of a UR type (alpha pi/2, 0, 0, pi/2, -pi/2, 0)."""
    d = (dh['d1'], 0, 0, dh['d4'], dh['d5'], dh['d6'])
    a = (0, dh['a2'], dh['a3'], 0, 0, 0)
    alpha = (math.pi / 2, 0, 0, math.pi / 2, -math.pi / 2, 0)
    out = np.eye(4)
    for theta, di, ai, al in zip(q, d, a, alpha):
        out = out @ rot_z(theta) @ trans(0, 0, di) @ trans(ai, 0, 0) @ rot_x(al)
    return out


# -- the built-in UR5 ---------------------------------------------------------------------------
@needs_description
def test_the_shipped_ur5_is_the_generators_output_from_urs_description():
    shipped = builtin_model_path('ur5').read_text(encoding='utf-8')
    regenerated = arm_xml('ur5', SHARED)
    assert regenerated == shipped
    new, old = model_arrays(compiled(regenerated)), model_arrays(mujoco.MjModel.from_xml_path(
        str(builtin_model_path('ur5'))))
    assert new.keys() == old.keys()
    for name in new:
        np.testing.assert_array_equal(new[name], old[name], err_msg=name)


def test_the_ur5_keeps_its_figures_but_the_link_inertias():
    m = mujoco.MjModel.from_xml_path(str(builtin_model_path('ur5')))
    assert [m.body(i).name for i in range(m.nbody)] == HEAD_BODIES
    assert [m.geom(i).name for i in range(m.ngeom)] == HEAD_GEOMS
    assert [m.site(i).name for i in range(m.nsite)] == ['base', 'flange', 'tool0']
    assert [m.joint(i).name for i in range(m.njnt)] == [m.actuator(i).name for i in range(m.nu)] == list(JOINTS)
    for name, expected in HEAD.items():
        np.testing.assert_allclose(getattr(m, name), np.asarray(expected, float).reshape(getattr(m, name).shape),
                                   atol=1e-6 if name == 'jnt_range' else 1e-9, err_msg=name)
    np.testing.assert_array_equal(m.actuator_gear[:, 0], 1.0)
    assert not m.actuator_forcelimited.any() and not m.actuator_ctrllimited.any()
    assert m.actuator_trntype.tolist() == [mujoco.mjtTrn.mjTRN_JOINT] * 6
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST and m.opt.timestep == 0.002
    # the base: a uniform solid cylinder of physical_parameters.yaml's links.base (r 0.06, L 0.05), 4 kg
    np.testing.assert_allclose(m.body_inertia[1], [4 * (3 * 0.06 ** 2 + 0.05 ** 2) / 12] * 2 + [4 * 0.06 ** 2 / 2])
    # the upper arm: UR's cylinder tensor (izz 0.0151074 along the tube) turned by pitch pi/2 into the link's x
    np.testing.assert_allclose(full_inertia(m, 3), np.diag([0.0151074, 0.13388583541666665, 0.13388583541666665]),
                               atol=1e-12)


def test_the_ur5_needs_no_description_and_records_its_effort_limits(monkeypatch):
    monkeypatch.delenv(DESCRIPTION_ENV, raising=False)
    assert arm_xml('UR5') == builtin_model_path('ur5').read_text(encoding='utf-8')
    expected = dict(zip(JOINTS, (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)))
    assert effort_limits('ur5') == expected
    cell = compile_cell(build_cell_spec(CellConfig()))
    assert model_effort_limits(cell) == {k: v for k, v in zip(arm_joint_names(), expected.values())}


# -- every type ---------------------------------------------------------------------------------
@needs_description
@pytest.mark.parametrize('arm_type', UR_TYPES)
def test_every_type_compiles_with_its_descriptions_figures_and_dh_chain(arm_type):
    desc = read_arm_description(arm_type, SHARED / 'config')
    model = compiled(arm_xml(arm_type, SHARED))
    data = mujoco.MjData(model)
    for link in LINKS:
        body = model.body(f'{link}_link').id
        figures = desc.links[link]
        assert model.body_mass[body] == figures.mass
        np.testing.assert_allclose(model.body_ipos[body], figures.com, atol=1e-12)
        ixx, iyy, izz, ixy, ixz, iyz = figures.tensor
        rot = np.zeros(9)
        mujoco.mju_euler2Quat(quat := np.zeros(4), np.asarray(figures.rotation), 'XYZ')  # URDF rpy, extrinsic
        mujoco.mju_quat2Mat(rot, quat)
        rot = rot.reshape(3, 3)
        expected = rot @ np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]) @ rot.T
        np.testing.assert_allclose(full_inertia(model, body), expected, atol=1e-9 * np.trace(expected))
    assert model.body_mass[model.body('base_link').id] == desc.base_mass
    assert model_effort_limits(model) == effort_limits(arm_type, SHARED) == {
        j: desc.limits[j].effort for j in JOINTS}
    for joint in JOINTS:
        position = desc.limits[joint].position
        assert bool(model.jnt_limited[model.joint(joint).id]) == (position is not None)
        if position is not None:
            np.testing.assert_allclose(model.jnt_range[model.joint(joint).id], position, atol=1e-9)
    addr = [model.joint(name).qposadr[0] for name in JOINTS]
    rng = np.random.default_rng(11)
    for _ in range(5):
        q = rng.uniform(-math.pi, math.pi, 6)
        data.qpos[addr] = q
        mujoco.mj_kinematics(model, data)
        tool0 = np.linalg.inv(site_pose(model, data, 'base')) @ site_pose(model, data, 'tool0')
        position, angle = pose_error(tool0, dh_tool0(q, desc.dh))
        assert position < 1e-6 and angle < 1e-6, (arm_type, position, angle)


@needs_description
def test_a_cell_is_built_with_another_arm_on_the_configured_mount(tmp_path):
    cell_yaml = tmp_path / 'cell.yaml'
    cell_yaml.write_text(yaml.safe_dump({'cell': {'arm': {'type': 'ur10e', 'ur_description': str(SHARED),
                                                          'prefix': 'ra_', 'xyz': [0.1, 0, 0]}}}))
    config = CellConfig.from_yaml(cell_yaml)
    model = compile_cell(build_cell_spec(config))
    desc = read_arm_description('ur10e', SHARED / 'config')
    root = model.body(arm_root_name('ra_')).id
    assert model.body_subtreemass[root] - model.body_subtreemass[model.body('rh_forearm').id] == pytest.approx(
        desc.base_mass + sum(link.mass for link in desc.links.values()))
    top = config.cabinet.size[2]      # the arm's mount is relative to the cabinet's top site
    assert model.body_pos[root] == pytest.approx([0.1, 0, top])
    assert model_effort_limits(model)['ra_shoulder_pan_joint'] == 330.0
    # arm: TYPE is short for arm: {type: TYPE}; an unknown type is named
    assert CellConfig.from_dict({'cell': {'arm': 'UR3e'}}).arm.type == 'ur3e'
    with pytest.raises(ConfigError, match=r'cell\.arm\.type: unknown arm type .ur11.'):
        CellConfig.from_dict({'cell': {'arm': {'type': 'ur11'}}})


# -- where the description comes from -----------------------------------------------------------
def test_description_lookup_order_and_the_error_without_one(tmp_path, monkeypatch):
    monkeypatch.delenv(DESCRIPTION_ENV, raising=False)
    empty = tmp_path / 'empty'
    empty.mkdir()
    with pytest.raises(ConfigError, match='--ur-description .*no UR description there'):
        find_ur_description(empty)
    monkeypatch.setenv(DESCRIPTION_ENV, str(empty))
    with pytest.raises(ConfigError, match=f'{DESCRIPTION_ENV} .*no UR description there'):
        find_ur_description()
    monkeypatch.delenv(DESCRIPTION_ENV)
    if find_ur_description() is None:     # no ur_description ROS package installed here: UR's shipped figures
        assert 'Universal Robots UR10E, MJCF' in arm_xml('ur10e')
    with pytest.raises(ConfigError, match="unknown arm type 'ur11'; known: ur3, ur3e, ur5"):
        arm_xml('ur11')


@needs_description
def test_a_checkout_its_config_folder_and_the_environment_all_serve(tmp_path, monkeypatch):
    monkeypatch.delenv(DESCRIPTION_ENV, raising=False)
    assert find_ur_description(SHARED) == find_ur_description(SHARED / 'config') == SHARED / 'config'
    monkeypatch.setenv(DESCRIPTION_ENV, str(SHARED))
    assert find_ur_description() == SHARED / 'config'
    with pytest.raises(ConfigError, match='--ur-description'):
        find_ur_description(tmp_path)
    assert arm_xml('ur16e') == arm_xml('ur16e', SHARED)


def copy_description(folder: Path, arm_type: str) -> Path:
    """The shared description's three files of ``arm_type`` copied into ``folder/arm_type``; returns it."""
    (folder / arm_type).mkdir(parents=True, exist_ok=True)
    for name in ('default_kinematics.yaml', 'physical_parameters.yaml', 'joint_limits.yaml'):
        (folder / arm_type / name).write_text((SHARED / 'config' / arm_type / name).read_text())
    return folder / arm_type


@needs_description
def test_a_broken_description_file_is_one_line_naming_it(tmp_path):
    copy_description(tmp_path, 'ur5e')
    phys = tmp_path / 'ur5e' / 'physical_parameters.yaml'
    phys.write_text(phys.read_text().replace('forearm_mass:', 'forearm_mas:'))
    with pytest.raises(ConfigError) as err:
        arm_xml('ur5e', tmp_path)
    assert str(err.value) == f'{phys}: missing inertia_parameters.forearm_mass' and '\n' not in str(err.value)
    phys.write_text((SHARED / 'config' / 'ur5e' / 'physical_parameters.yaml').read_text())
    limits = tmp_path / 'ur5e' / 'joint_limits.yaml'
    limits.write_text(limits.read_text().replace('max_effort: 28.0', 'max_effort: .nan', 1))
    with pytest.raises(ConfigError, match='max_effort must be a finite number'):
        arm_xml('ur5e', tmp_path)


# -- writing and the command line ---------------------------------------------------------------
@needs_description
def test_write_arm_mjcf_refuses_an_existing_file_without_force(tmp_path):
    out = tmp_path / 'ur10e.xml'
    out.write_text('mine')
    with pytest.raises(ConfigError, match='exists'):
        write_arm_mjcf('ur10e', out, SHARED)
    assert out.read_text() == 'mine'
    path, model = write_arm_mjcf('ur10e', out, SHARED, force=True)
    assert path == out and model.nu == 6 and mujoco.MjModel.from_xml_path(str(out)).nbody == model.nbody


def test_cli_writes_an_arm_alone_and_refuses_bad_input_with_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(DESCRIPTION_ENV, raising=False)
    out = tmp_path / 'arm.xml'
    assert model_cli.main(['--arm', 'ur5', '--out', str(out)]) == 0
    assert out.read_text() == builtin_model_path('ur5').read_text()
    capsys.readouterr()
    bad = [(['--arm', 'ur11'], "unknown arm type 'ur11'"),
           (['--arm', 'ur10e', '--ur-description', str(tmp_path / 'nowhere')], 'no such folder'),
           (['--arm', 'ur10e', '--ur-description', str(tmp_path)], 'no UR description there'),
           (['--arm', 'ur5', '--hand', str(out)], 'belong to --cell')]
    for args, message in bad:
        target = tmp_path / 'not_written.xml'
        assert model_cli.main(args + ['--out', str(target)]) == 2, args
        err = capsys.readouterr().err
        assert message in err and err.count('\n') == 1 and not target.exists(), (args, err)


@needs_description
def test_cli_builds_the_cell_with_another_arm(tmp_path, capsys):
    out = tmp_path / 'cell.xml'
    assert model_cli.main(['--cell', '--config', str(REPO / 'config' / 'cell.yaml'), '--arm', 'ur10e',
                           '--ur-description', str(SHARED), '--out', str(out)]) == 0
    assert 'MiR250 + cabinet + UR10E' in out.read_text().splitlines()[0]
    model = mujoco.MjModel.from_xml_path(str(out))
    config = CellConfig.from_yaml(REPO / 'config' / 'cell.yaml')
    expected = np.asarray(config.arm.mount.xyz) + [0, 0, config.cabinet.size[2]]   # on the cabinet's top
    assert model.body_pos[model.body(arm_root_name()).id] == pytest.approx(expected)
    assert model_effort_limits(model)['elbow_joint'] == 150.0 and model_effort_limits(model)['wrist_1_joint'] == 54.0
