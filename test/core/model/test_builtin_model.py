"""Tests for the built-in primitive-geometry Shadow Hand E model.

At run time the package finds the model with
``importlib.resources.files('shadow_twin.model') / 'builtin' / 'shadow_hand_e.xml'``;
here the path is taken relative to the repository so that the test does not
depend on the package being installed.
"""

from pathlib import Path

import mujoco
import numpy as np
import pytest

MODEL_PATH = Path(__file__).parents[3] / "shadow_twin" / "model" / "builtin" / "shadow_hand_e.xml"

FINGERS = ("FF", "MF", "RF", "LF")

# ROS joint name -> (lower, upper) in rad, in kinematic-tree order.
EXPECTED_JOINTS = {
    "rh_WRJ2": (-0.523599, 0.174533),
    "rh_WRJ1": (-0.698132, 0.488692),
    **{
        f"rh_{f}J{k}": rng
        for f in ("FF", "MF", "RF")
        for k, rng in ((4, (-0.349066, 0.349066)), (3, (0.0, 1.5708)), (2, (0.0, 1.5708)), (1, (0.0, 1.5708)))
    },
    "rh_LFJ5": (0.0, 0.785398),
    "rh_LFJ4": (-0.349066, 0.349066),
    "rh_LFJ3": (0.0, 1.5708),
    "rh_LFJ2": (0.0, 1.5708),
    "rh_LFJ1": (0.0, 1.5708),
    "rh_THJ5": (-1.0472, 1.0472),
    "rh_THJ4": (0.0, 1.22173),
    "rh_THJ3": (-0.20944, 0.20944),
    "rh_THJ2": (-0.698132, 0.698132),
    "rh_THJ1": (0.0, 1.5708),
}

# actuator name -> (transmission type, target name)
EXPECTED_ACTUATORS = [
    ("rh_WRJ2", "joint", "rh_WRJ2"),
    ("rh_WRJ1", "joint", "rh_WRJ1"),
    ("rh_FFJ4", "joint", "rh_FFJ4"),
    ("rh_FFJ3", "joint", "rh_FFJ3"),
    ("rh_FFJ0", "tendon", "rh_FFJ0"),
    ("rh_MFJ4", "joint", "rh_MFJ4"),
    ("rh_MFJ3", "joint", "rh_MFJ3"),
    ("rh_MFJ0", "tendon", "rh_MFJ0"),
    ("rh_RFJ4", "joint", "rh_RFJ4"),
    ("rh_RFJ3", "joint", "rh_RFJ3"),
    ("rh_RFJ0", "tendon", "rh_RFJ0"),
    ("rh_LFJ5", "joint", "rh_LFJ5"),
    ("rh_LFJ4", "joint", "rh_LFJ4"),
    ("rh_LFJ3", "joint", "rh_LFJ3"),
    ("rh_LFJ0", "tendon", "rh_LFJ0"),
    ("rh_THJ5", "joint", "rh_THJ5"),
    ("rh_THJ4", "joint", "rh_THJ4"),
    ("rh_THJ3", "joint", "rh_THJ3"),
    ("rh_THJ2", "joint", "rh_THJ2"),
    ("rh_THJ1", "joint", "rh_THJ1"),
]

EXPECTED_BODIES = (
    ["rh_forearm", "rh_wrist", "rh_palm"]
    + [f"rh_{f}{seg}" for f in ("ff", "mf", "rf") for seg in ("knuckle", "proximal", "middle", "distal")]
    + ["rh_lfmetacarpal"]
    + [f"rh_lf{seg}" for seg in ("knuckle", "proximal", "middle", "distal")]
    + ["rh_thbase", "rh_thproximal", "rh_thhub", "rh_thmiddle", "rh_thdistal"]
)


def _name(model, objtype, i):
    return mujoco.mj_id2name(model, objtype, i)


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(str(MODEL_PATH))


def test_model_file_exists_and_compiles(model):
    assert MODEL_PATH.is_file()
    assert model.nq == 24 and model.nv == 24
    assert model.opt.timestep == pytest.approx(0.002)
    spec = mujoco.MjSpec.from_file(str(MODEL_PATH))
    assert spec.modelname == "shadow_hand_e"
    # no free joint: the forearm is fixed to the world
    assert model.body("rh_forearm").parentid[0] == 0
    assert model.body("rh_forearm").jntnum[0] == 0
    # no meshes: primitive geometry only
    assert model.nmesh == 0


def test_mjspec_compile_and_xml_round_trip(model):
    spec = mujoco.MjSpec.from_file(str(MODEL_PATH))
    compiled = spec.compile()
    again = mujoco.MjModel.from_xml_string(spec.to_xml())
    for m in (compiled, again):
        assert (m.nq, m.nu, m.ntendon, m.nbody, m.ngeom) == (
            model.nq, model.nu, model.ntendon, model.nbody, model.ngeom)
        np.testing.assert_allclose(m.jnt_range, model.jnt_range)
        np.testing.assert_allclose(m.body_mass, model.body_mass)
        np.testing.assert_allclose(m.dof_damping, model.dof_damping)


def test_joint_names_ranges_and_limits(model):
    names = [_name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)]
    assert names == list(EXPECTED_JOINTS)
    for j, name in enumerate(names):
        assert model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE, name
        assert model.jnt_limited[j], name
        np.testing.assert_allclose(model.jnt_range[j], EXPECTED_JOINTS[name], atol=1e-6, err_msg=name)


def test_joint_axes_follow_published_convention(model):
    axis = {(_name(model, mujoco.mjtObj.mjOBJ_JOINT, j)): model.jnt_axis[j] for j in range(model.njnt)}
    for f in FINGERS:
        for k in (1, 2, 3):
            np.testing.assert_allclose(axis[f"rh_{f}J{k}"], [1, 0, 0])
    np.testing.assert_allclose(axis["rh_FFJ4"], [0, -1, 0])
    np.testing.assert_allclose(axis["rh_MFJ4"], [0, -1, 0])
    np.testing.assert_allclose(axis["rh_RFJ4"], [0, 1, 0])
    np.testing.assert_allclose(axis["rh_LFJ4"], [0, 1, 0])
    np.testing.assert_allclose(axis["rh_LFJ5"], [0.573576, 0, 0.819152], atol=1e-5)


def test_joint_default_classes(model):
    def dof(name):
        return model.jnt_dofadr[model.joint(name).id]

    for name in ("rh_WRJ1", "rh_WRJ2"):
        assert model.dof_damping[dof(name)] == pytest.approx(1.0)
        assert model.dof_frictionloss[dof(name)] == pytest.approx(0.1)
    for name in ("rh_FFJ3", "rh_LFJ5", "rh_RFJ1"):
        assert model.dof_damping[dof(name)] == pytest.approx(0.05)
        assert model.dof_frictionloss[dof(name)] == pytest.approx(0.1)
        assert model.dof_armature[dof(name)] == pytest.approx(0.005)
    for k in range(1, 6):
        assert model.dof_frictionloss[dof(f"rh_THJ{k}")] == pytest.approx(0.001)
        assert model.dof_damping[dof(f"rh_THJ{k}")] == pytest.approx(0.05)


def test_bodies_and_inertials(model):
    for name in EXPECTED_BODIES:
        assert model.body(name).mass[0] > 0, name
    assert model.body("rh_forearm").mass[0] == pytest.approx(3.0)
    assert model.body("rh_palm").mass[0] == pytest.approx(0.3)
    assert model.body("rh_ffproximal").mass[0] == pytest.approx(0.030)
    assert model.body("rh_ffmiddle").mass[0] == pytest.approx(0.017)
    assert model.body("rh_ffdistal").mass[0] == pytest.approx(0.012)
    # segment lengths: proximal 0.045, middle 0.025
    np.testing.assert_allclose(model.body("rh_ffmiddle").pos, [0, 0, 0.045])
    np.testing.assert_allclose(model.body("rh_ffdistal").pos, [0, 0, 0.025])


def test_tendons(model):
    assert model.ntendon == 4
    for f in FINGERS:
        t = model.tendon(f"rh_{f}J0").id
        adr, num = model.tendon_adr[t], model.tendon_num[t]
        assert num == 2
        joints = sorted(
            _name(model, mujoco.mjtObj.mjOBJ_JOINT, model.wrap_objid[adr + i]) for i in range(num))
        assert joints == [f"rh_{f}J1", f"rh_{f}J2"]
        assert all(model.wrap_type[adr + i] == mujoco.mjtWrap.mjWRAP_JOINT for i in range(num))
        np.testing.assert_allclose(model.wrap_prm[adr:adr + num], [1.0, 1.0])


def test_actuators(model):
    assert model.nu == 20
    trn = {"joint": (mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtObj.mjOBJ_JOINT),
           "tendon": (mujoco.mjtTrn.mjTRN_TENDON, mujoco.mjtObj.mjOBJ_TENDON)}
    for a, (name, kind, target) in enumerate(EXPECTED_ACTUATORS):
        assert _name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a) == name
        trntype, objtype = trn[kind]
        assert model.actuator_trntype[a] == trntype, name
        assert _name(model, objtype, model.actuator_trnid[a, 0]) == target
        assert model.actuator_gear[a, 0] == pytest.approx(1.0)
        assert not model.actuator_ctrllimited[a], name
        # plain torque motor: force = gain * ctrl, no bias
        assert model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        assert model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE


def test_no_self_contacts_across_range(model):
    data = mujoco.MjData(model)
    lo, hi = model.jnt_range[:, 0], model.jnt_range[:, 1]
    rng = np.random.default_rng(0)
    poses = [np.zeros(model.nq), lo, hi, (lo + hi) / 2, np.where(np.arange(model.nq) % 2, lo, hi)]
    poses += [lo + (hi - lo) * rng.random(model.nq) for _ in range(50)]
    for q in poses:
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        assert data.ncon == 0, q


def _pd_gains(name):
    kp, kd = 4.0, 0.1
    if name.startswith("rh_TH"):
        kd = 0.2
    if name == "rh_WRJ1":
        kp = 10.0
    if name == "rh_WRJ2":
        kp = 8.0
    return kp, kd


def test_pd_ramp_tracks_with_coupled_j0(model):
    data = mujoco.MjData(model)
    names = [_name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)]
    qadr = model.jnt_qposadr.copy()
    vadr = model.jnt_dofadr.copy()
    kp = np.array([_pd_gains(n)[0] for n in names])
    kd = np.array([_pd_gains(n)[1] for n in names])
    ramped = np.array([any(n == f"rh_{f}J{k}" for f in FINGERS for k in (1, 2, 3)) for n in names])
    # actuator -> joints whose PD effort it receives (J0 gets J1 + J2)
    sources = []
    for a in range(model.nu):
        an = _name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a)
        if an.endswith("J0"):
            sources.append([names.index(an[:-1] + "1"), names.index(an[:-1] + "2")])
        else:
            sources.append([names.index(an)])

    amp, ramp_time, sim_time = 1.5707, 3.0, 2.0
    ff3, ff2, ff1 = (names.index(f"rh_FFJ{k}") for k in (3, 2, 1))
    max_err = 0.0
    for _ in range(int(round(sim_time / model.opt.timestep))):
        qd = amp * data.time / ramp_time
        qdes = np.where(ramped, qd, 0.0)
        vdes = np.where(ramped, amp / ramp_time, 0.0)
        tau = kp * (qdes - data.qpos[qadr]) + kd * (vdes - data.qvel[vadr])
        for a, js in enumerate(sources):
            data.ctrl[a] = tau[js].sum()
        mujoco.mj_step(model, data)
        max_err = max(max_err, float(np.abs(data.qpos[qadr] - np.where(ramped, qd, 0.0)).max()))

    assert np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()
    q = data.qpos[qadr]
    assert q[ff3] > 0.3  # moved towards its (~1.05 rad) target
    assert q[ff1] > 0.3 and q[ff2] > 0.3  # the tendon motion is split over J1 and J2
    assert max_err < 0.3
