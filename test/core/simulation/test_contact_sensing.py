"""Contact sensing (shadow_twin/simulation/contact_sensing.py): contact, wrench and slip checked
against physics (a box's weight, its sliding and spinning speeds, Coulomb deceleration), against
MuJoCo's own body forces (``cfrc_ext``) and Newton's third law, on a box and on the Shadow Hand E;
the reading against its definition computed contact by contact (``mj_contactForce``,
``mj_objectVelocity``) on objects falling onto the hand."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.simulation.contact_sensing import (DEFAULT_SENSORS, NO_CONTACT, ContactReader, SensingConfig,
                                                    parse_sensing, sensing_geoms)

HALF = (0.03, 0.02, 0.01)          # the box's half sizes, m
MASS = 0.3                         # kg


def _box_model(*, quat=(1, 0, 0, 0), z=None, friction=1.0, condim=3, cone='pyramidal', offset=(0, 0, 0),
               gravity=True) -> mujoco.MjModel:
    """A plane ``floor`` and a free body ``box`` (its box geom ``box_geom`` at ``offset`` in the body)."""
    spec = mujoco.MjSpec()
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC if cone == 'elliptic' else mujoco.mjtCone.mjCONE_PYRAMIDAL
    if not gravity:
        spec.option.gravity = [0, 0, 0]
    surface = dict(condim=condim, friction=[friction, 0.01, 0.001])
    spec.worldbody.add_geom(name='floor', type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1, 1, 0.1], **surface)
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.array(quat, dtype=float))
    lowest = np.abs(rot.reshape(3, 3)[2]) @ HALF          # half height of the rotated box
    body = spec.worldbody.add_body(name='box', pos=[0.1, -0.05, lowest - 1e-4 if z is None else z], quat=list(quat))
    body.add_freejoint()
    body.add_geom(name='box_geom', type=mujoco.mjtGeom.mjGEOM_BOX, size=list(HALF), mass=MASS, pos=list(offset),
                  **surface)
    return spec.compile()


def _settle(model, data, seconds=1.0):
    for _ in range(int(seconds / model.opt.timestep)):
        mujoco.mj_step(model, data)
    mujoco.mj_forward(model, data)


def _reader(model, min_force=0.01, **extra):
    return ContactReader(model, parse_sensing({'box': ['box'], 'floor': 'floor', **extra}, min_force))


def _in_world(data, body, vector):
    return data.xmat[body].reshape(3, 3) @ vector


# 90 degrees about x, about y, 180 about x: the box rests on another face, and its frame is turned
TURNS = [(1, 0, 0, 0), (math.sqrt(0.5), math.sqrt(0.5), 0, 0), (math.sqrt(0.5), 0, math.sqrt(0.5), 0), (0, 1, 0, 0)]


@pytest.mark.parametrize('quat', TURNS)
def test_a_resting_box_feels_its_weight_along_the_normal_in_its_own_frame(quat):
    model = _box_model(quat=quat)
    data = mujoco.MjData(model)
    _settle(model, data)
    reading = _reader(model).read(data)
    box, floor = reading['box'], reading['floor']
    weight = MASS * -model.opt.gravity[2]
    up_in_box = data.xmat[1].reshape(3, 3).T @ np.array([0.0, 0.0, weight])     # world +z in the box's frame
    assert box.in_contact and box.n_contacts == 4 and box.touching == ('world',)
    assert np.linalg.norm(box.force - up_in_box) < 0.01 * weight
    assert box.normal_force == pytest.approx(weight, rel=0.01)
    assert np.linalg.norm(box.torque) < 1e-3 * weight * np.linalg.norm(HALF)    # balanced about its centre
    assert box.slip < 1e-4
    # the floor (the world's frame) takes the opposite force, at the box's place
    assert floor.touching == ('box',) and floor.force == pytest.approx(-_in_world(data, 1, box.force), abs=1e-9)
    assert floor.torque == pytest.approx(np.cross(data.xpos[1], floor.force), abs=1e-3 * weight * 0.01)


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
@pytest.mark.parametrize('condim', [1, 3, 4, 6])
def test_the_wrench_is_mujocos_cfrc_ext_moved_to_the_body_origin(cone, condim):
    """A box off its body's origin, turned, sliding and spinning (torsional and rolling friction
    with condim 4 and 6): the wrench equals MuJoCo's own body force of all its contacts."""
    model = _box_model(quat=TURNS[1], condim=condim, cone=cone, offset=(0.01, -0.005, 0.02), friction=0.3)
    data = mujoco.MjData(model)
    _settle(model, data, 0.3)
    data.qvel[:6] = [0.3, -0.1, 0.0, 0.5, -1.0, 4.0]
    _settle(model, data, 0.02)
    mujoco.mj_rnePostConstraint(model, data)
    box = 1
    expected = np.zeros(6)        # torque, force about the body origin, in the body frame
    mujoco.mju_transformSpatial(expected, data.cfrc_ext[box], 1, data.xpos[box],
                                data.subtree_com[model.body_rootid[box]], data.xmat[box])
    reading = _reader(model, min_force=0.0).read(data)['box']
    assert data.ncon >= 1 and reading.n_contacts == data.ncon
    scale = MASS * 9.81
    assert reading.force == pytest.approx(expected[3:], abs=1e-9 * scale)
    assert reading.torque == pytest.approx(expected[:3], abs=1e-9 * scale)


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_slip_is_the_speed_of_a_box_sliding_without_friction(cone):
    model = _box_model(condim=1, cone=cone)
    data = mujoco.MjData(model)
    _settle(model, data, 0.3)
    data.qvel[:6] = [0.4, -0.3, 0.0, 0.0, 0.0, 0.0]
    _settle(model, data, 0.2)                          # frictionless: it keeps its speed
    box = _reader(model).read(data)['box']
    assert box.in_contact and box.slip == pytest.approx(0.5, rel=0.02)


def test_slip_of_a_spinning_box_is_the_speed_of_its_corners():
    """Frictionless, spinning at w about the vertical: each corner slides at w r, r its distance
    from the axis, and the corners bear equal loads."""
    model = _box_model(condim=1)
    data = mujoco.MjData(model)
    _settle(model, data, 0.3)
    spin = 5.0
    data.qvel[:6] = [0.0, 0.0, 0.0, 0.0, 0.0, spin]
    _settle(model, data, 0.1)
    box = _reader(model).read(data)['box']
    assert box.n_contacts == 4 and box.slip == pytest.approx(spin * math.hypot(HALF[0], HALF[1]), rel=0.02)


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_slip_of_a_box_braking_on_friction_follows_coulomb(cone):
    """Pushed at v0 on friction mu: v(t) = v0 - mu g t on average (the box rocks a little, its
    normal force varies), and at each instant a sliding friction of mu times the normal force
    against the motion."""
    mu, v0, t = 0.1, 0.5, 0.1
    model = _box_model(friction=mu, cone=cone)
    data = mujoco.MjData(model)
    _settle(model, data, 0.3)
    data.qvel[0] = v0
    _settle(model, data, t)
    box = _reader(model).read(data)['box']
    assert box.slip == pytest.approx(v0 - mu * 9.81 * t, rel=0.03)
    force = _in_world(data, 1, box.force)
    assert force[0] == pytest.approx(-mu * box.normal_force, rel=0.01) and abs(force[1]) < 1e-6 * box.normal_force


def test_no_contact_when_lifted_or_only_penetrating_without_force():
    """Penetrating 10 microns but leaving at 1 m/s: MuJoCo lists the contacts (dist < 0), but the
    soft constraint needs no force to let the box go: no contact. Lifted: no contact either."""
    model = _box_model(z=HALF[2] - 1e-5, gravity=False)
    data = mujoco.MjData(model)
    data.qvel[2] = 1.0
    mujoco.mj_forward(model, data)
    assert data.ncon == 4 and np.all(data.contact.dist < 0) and np.all(data.efc_force == 0)
    reading = _reader(model, min_force=0.0).read(data)
    for label in ('box', 'floor'):
        assert not reading[label].in_contact and reading[label].n_contacts == 0 and reading[label].touching == ()
        assert np.all(reading[label].force == 0) and reading[label].slip == 0.0
    data.qvel[2] = 0.0                               # the same penetration at rest: pushed out, contact
    mujoco.mj_forward(model, data)
    assert _reader(model, min_force=0.0).read(data)['box'].n_contacts == 4
    far = _box_model(z=0.5, gravity=False)
    far_data = mujoco.MjData(far)
    mujoco.mj_forward(far, far_data)
    assert far_data.ncon == 0 and not _reader(far).read(far_data)['box'].in_contact


def test_a_contact_under_the_force_threshold_does_not_count():
    model = _box_model()
    data = mujoco.MjData(model)
    _settle(model, data)
    weight = MASS * 9.81
    assert _reader(model, min_force=weight / 4 * 0.9).read(data)['box'].n_contacts == 4
    assert not _reader(model, min_force=weight / 4 * 1.1).read(data)['box'].in_contact   # each corner bears w/4


# ---------------------------------------------------------------------------------------------
# The Shadow Hand E: a ball pressed into one label touches that label only
# ---------------------------------------------------------------------------------------------

BALL = 0.006          # radius, m
PRESS = 0.0005        # penetration, m
# label -> the geom the ball is pressed into (from the palm side, -y in the hand's pose qpos0)
TARGETS = {'ff': 'rh_ffdistal_geom', 'mf': 'rh_mfdistal_geom', 'rf': 'rh_rfdistal_geom', 'lf': 'rh_lfdistal_geom',
           'th': 'rh_thdistal_geom', 'palm': 'rh_palm_core'}


def _hand_with_ball(target: str) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """The built-in hand without gravity, a free ball ``ball`` pressed PRESS deep into ``target``
    from the palm side (-y)."""
    path = str(builtin_model_path())
    bare = mujoco.MjModel.from_xml_path(path)
    bare_data = mujoco.MjData(bare)
    mujoco.mj_forward(bare, bare_data)
    geom = bare.geom(target).id
    size = bare.geom_size[geom]
    depth = size[1] if bare.geom_type[geom] == mujoco.mjtGeom.mjGEOM_BOX else size[0]   # box: half thickness in y
    centre = bare_data.geom_xpos[geom] + np.array([0.0, -1.0, 0.0]) * (depth + BALL - PRESS)
    spec = mujoco.MjSpec.from_file(path)
    spec.option.gravity = [0, 0, 0]
    ball = spec.worldbody.add_body(name='ball', pos=centre.tolist())
    ball.add_freejoint()
    ball.add_geom(name='ball_geom', type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[BALL, 0, 0], mass=0.01)
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


@pytest.mark.parametrize('label', list(TARGETS))
def test_a_ball_pressed_into_the_hand_touches_that_label_only(label):
    model, data = _hand_with_ball(TARGETS[label])
    reader = ContactReader(model, parse_sensing({**DEFAULT_SENSORS, 'ball': 'ball'}))
    reading = reader.read(data)
    touched = {name for name, r in reading.items() if r.in_contact}
    assert touched == {label, 'ball'}
    mine, ball = reading[label], reading['ball']
    assert mine.touching == ('ball',) and ball.touching == (reader.frames[label],)
    frame = model.body(reader.frames[label]).id
    push = _in_world(data, frame, mine.force)
    assert push[1] > 0.99 * np.linalg.norm(push) > 0            # pushed away from the ball, along +y
    assert push == pytest.approx(-_in_world(data, model.body('ball').id, ball.force), abs=1e-9)   # action = reaction
    assert mine.normal_force == pytest.approx(np.linalg.norm(push), rel=1e-6)   # no friction at rest


def test_the_default_labels_are_the_fingertips_and_palm_of_the_hand():
    model = mujoco.MjModel.from_xml_path(str(builtin_model_path()))
    reader = ContactReader(model)
    assert reader.labels == ('ff', 'mf', 'rf', 'lf', 'th', 'palm')
    assert reader.frames == {'ff': 'rh_ffdistal', 'mf': 'rh_mfdistal', 'rf': 'rh_rfdistal', 'lf': 'rh_lfdistal',
                             'th': 'rh_thdistal', 'palm': 'rh_palm'}
    assert [model.geom(g).name for g in reader.geoms['ff']] == ['rh_ffdistal_geom']
    assert len(reader.geoms['palm']) == 5
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    assert not any(r.in_contact for r in reader.read(data).values())     # the hand alone touches nothing


def test_a_geom_glob_senses_that_geom_in_its_body_frame():
    model = mujoco.MjModel.from_xml_path(str(builtin_model_path()))
    found = sensing_geoms(model, parse_sensing({'core': ['rh_palm_c*'], 'tips': ['rh_??distal', 'rh_thdistal']}))
    core, frame = found['core']
    assert [model.geom(g).name for g in core] == ['rh_palm_core'] and model.body(frame).name == 'rh_palm'
    tips, frame = found['tips']
    assert len(tips) == 5 and model.body(frame).name == 'rh_ffdistal'     # the first glob's first match
    every = sensing_geoms(model, parse_sensing({'all': '*'}))['all']
    assert len(every[0]) == model.ngeom and every[1] == 0                  # the world (and its floor) first


@pytest.mark.parametrize('sensors, min_force, words', [
    ({'ff': ['rh_ffdistal', 'rh_xxdistal']}, 0.01, "glob 'rh_xxdistal' matches no body or geom"),
    ({'ff': []}, 0.01, 'needs a list of body or geom globs'),
    ({'ff': ['']}, 0.01, 'is not a non-empty string'),
    ({'f f': ['rh_ffdistal']}, 0.01, 'is not a name'),
    ({}, 0.01, 'expected a mapping'),
    ({'ff': 'rh_ffdistal'}, -1.0, 'min_force must be a finite number >= 0 N'),
    ({'ff': 'rh_ffdistal'}, float('nan'), 'min_force must be a finite number >= 0 N'),
])
def test_bad_sensing_config_is_one_clear_line(sensors, min_force, words):
    model = mujoco.MjModel.from_xml_path(str(builtin_model_path()))
    with pytest.raises(ConfigError) as err:
        ContactReader(model, parse_sensing(sensors, min_force))
    assert words in str(err.value) and '\n' not in str(err.value)


def test_a_label_that_cannot_collide_is_refused():
    spec = mujoco.MjSpec()
    body = spec.worldbody.add_body(name='ghost')
    body.add_geom(name='ghost_geom', type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.01, 0, 0], contype=0, conaffinity=0)
    with pytest.raises(ConfigError, match="label 'g': no geom of ghost can collide"):
        ContactReader(spec.compile(), SensingConfig({'g': ('ghost',)}))


# ---------------------------------------------------------------------------------------------
# The fast reading equals a straightforward one, contact by contact, on objects falling onto the hand
# ---------------------------------------------------------------------------------------------

# name: (shape, size, position m, initial velocity m/s, condim, friction): falling onto the
# fingertips (the hand stands fingers up at qpos0) and thrown at the palm (its face looks to -y)
DROPPED = {
    'slab': ('box', [0.035, 0.012, 0.004], [0.022, -0.01, 0.452], [0.0, 0.0, 0.0], 3, [0.8, 0.005, 0.0001]),
    'ball': ('sphere', [0.008], [-0.011, -0.013, 0.46], [0.05, 0.0, 0.0], 6, [0.6, 0.01, 0.002]),
    'stick': ('capsule', [0.005, 0.02], [-0.033, -0.004, 0.47], [0.0, 0.1, 0.0], 4, [1.2, 0.02, 0.0001]),
    'nub': ('box', [0.008, 0.008, 0.008], [0.092, -0.019, 0.36], [0.0, 0.0, 0.0], 1, [0.0, 0.0, 0.0]),
    'puck': ('cylinder', [0.012, 0.006], [0.0, -0.06, 0.28], [0.0, 0.9, 0.0], 3, [0.3, 0.005, 0.0001]),
}
SENSORS = {**DEFAULT_SENSORS, 'slab': 'slab', 'ball': 'ball', 'objects': ['stick', 'nub', 'puck'],
           'pair': ['rh_ffdistal_geom', 'rh_mfdistal'], 'everything': '*'}


def _hand_with_falling_objects(cone: str) -> mujoco.MjModel:
    """The built-in hand (its drives hold qpos0) with the free objects of :data:`DROPPED`."""
    spec = mujoco.MjSpec.from_file(str(builtin_model_path()))
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC if cone == 'elliptic' else mujoco.mjtCone.mjCONE_PYRAMIDAL
    shapes = {'box': mujoco.mjtGeom.mjGEOM_BOX, 'sphere': mujoco.mjtGeom.mjGEOM_SPHERE,
              'capsule': mujoco.mjtGeom.mjGEOM_CAPSULE, 'cylinder': mujoco.mjtGeom.mjGEOM_CYLINDER}
    for name, (shape, size, pos, _, condim, friction) in DROPPED.items():
        body = spec.worldbody.add_body(name=name, pos=pos, quat=[0.99, 0.05, 0.1, 0.0])
        body.add_freejoint()
        body.add_geom(name=name, type=shapes[shape], size=size + [0.0] * (3 - len(size)), mass=0.03, condim=condim,
                      friction=friction)
    return spec.compile()


def _reference(model: mujoco.MjModel, data: mujoco.MjData, reader: ContactReader) -> dict[str, tuple]:
    """{label: (force, torque, slip, normal force, count, touching, sides)} from the module doc's
    definitions, contact by contact: ``mj_contactForce`` turned out of the contact frame, the moment
    about the frame body's origin, the bodies' velocities at the contact point from
    ``mj_objectVelocity`` (at the body origin) with the normal part removed; sides: the signs seen
    (+1 the label's geom is geom2, -1 geom1)."""
    out = {}
    for label in reader.labels:
        geoms, body = set(reader.geoms[label].tolist()), model.body(reader.frames[label]).id
        force, moment, total, sliding, count, touching, sides = np.zeros(3), np.zeros(3), 0.0, 0.0, 0, set(), set()
        for i in range(data.ncon):
            g1, g2 = data.contact.geom[i]
            side = int(g2 in geoms) - int(g1 in geoms)
            local = np.zeros(6)
            mujoco.mj_contactForce(model, data, i, local)
            if side == 0 or local[0] <= reader.sensing.min_force:
                continue
            frame, point = data.contact.frame[i].reshape(3, 3), data.contact.pos[i]
            on_label = side * frame.T @ local[:3]
            force += on_label
            moment += np.cross(point - data.xpos[body], on_label) + side * frame.T @ local[3:]
            velocity = []
            for geom in (g1, g2):
                owner, twist = model.geom_bodyid[geom], np.zeros(6)
                mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, owner, twist, 0)
                velocity.append(twist[3:] + np.cross(twist[:3], point - data.xpos[owner]))
            relative = velocity[1] - velocity[0]
            slip = float(np.linalg.norm(relative - (relative @ frame[0]) * frame[0]))
            total, sliding, count = total + local[0], sliding + slip * local[0], count + 1
            touching.add(model.body(model.geom_bodyid[g1 if side > 0 else g2]).name)
            sides.add(side)
        rotation = data.xmat[body].reshape(3, 3)
        out[label] = (rotation.T @ force, rotation.T @ moment, sliding / total if count else 0.0, total, count,
                      tuple(sorted(touching)), sides)
    return out


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
@pytest.mark.parametrize('min_force', [0.0, 0.05])
def test_the_reading_equals_the_contact_by_contact_definition_on_objects_falling_onto_the_hand(cone, min_force):
    """Every 4th step of 0.5 s while five objects (condim 1, 3, 4, 6) land on the fingertips, bounce,
    slide and roll, and one is thrown at the palm: each label's reading equals :func:`_reference` to
    1e-9 (N, N m, m/s). The labels overlap (a fingertip's geom is also in ``pair`` and
    ``everything``; ``everything``'s own contacts are internal) and include the objects (the label
    on geom1 or geom2 of a contact)."""
    model = _hand_with_falling_objects(cone)
    data = mujoco.MjData(model)
    for name, (*_, velocity, _, _) in DROPPED.items():
        data.qvel[model.jnt_dofadr[model.body(name).jntadr[0]]:][:3] = velocity
    reader = ContactReader(model, parse_sensing(SENSORS, min_force))
    seen = {'labels': set(), 'sides': set(), 'several': 0, 'sliding': 0, 'torque': 0, 'objects': 0}
    for step in range(250):
        mujoco.mj_step(model, data)
        if step % 4:
            continue
        reading, expected = reader.read(data), _reference(model, data, reader)
        again = reader.read(data)           # the same contacts: the kept candidates of the last read
        assert all(np.array_equal(again[label].force, reading[label].force) for label in reader.labels)
        for label, (force, torque, slip, normal, count, touching, sides) in expected.items():
            got = reading[label]
            if not count:
                assert got is NO_CONTACT
                continue
            assert got.in_contact and got.n_contacts == count and got.touching == touching
            assert got.force == pytest.approx(force, abs=1e-9) and got.torque == pytest.approx(torque, abs=1e-9)
            assert got.slip == pytest.approx(slip, abs=1e-9) and got.normal_force == pytest.approx(normal, abs=1e-9)
            seen['labels'].add(label)
            seen['sides'] |= sides
            seen['several'] += count > 1
            seen['sliding'] += slip > 1e-3
            seen['torque'] += label in DEFAULT_SENSORS and np.linalg.norm(torque) > 1e-4
            seen['objects'] += label in ('slab', 'ball', 'objects')
    # the states covered what the fast reading does differently from the definition
    assert {'ff', 'mf', 'rf', 'lf', 'th', 'palm', 'slab', 'ball', 'objects', 'pair'} <= seen['labels']
    assert seen['sides'] == {-1, 1} and min(seen['several'], seen['sliding'], seen['torque'], seen['objects']) > 5
    assert 'everything' not in seen['labels']       # every contact is internal to it: no reading
