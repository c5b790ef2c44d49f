"""shadow_twin.model.reduction: which subtrees can act on the compared joints, on small models built to couple
one way each, and the reduced spec."""

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ModelError
from shadow_twin.model.reduction import frozen_spec, plan_reduction, reduced_spec, subtree_joints

#: A base (welded to the world, or on a hinge) carrying two arms: 'a' is compared, 'b' and 'c' are not.
TEMPLATE = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="base" pos="0 0 1">
      {base_joint}
      <geom name="base_geom" type="box" size="0.1 0.1 0.1" mass="1"/>
      <body name="a1" pos="0.3 0 0">
        <joint name="a1" axis="0 1 0"/>
        <geom name="a1_geom" type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.2" {a_contact}/>
        <body name="a2" pos="0.3 0 0">
          <joint name="a2" axis="0 1 0"/>
          <geom name="a2_geom" type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.1" {a_contact}/>
          <site name="a_site" pos="0.2 0 0"/>
        </body>
      </body>
      <body name="b1" pos="-0.3 0 0">
        <joint name="b1" axis="0 1 0"/>
        <geom name="b1_geom" type="capsule" fromto="0 0 0 -0.3 0 0" size="0.02" mass="0.2" {b_contact}/>
        <site name="b_site" pos="-0.3 0 0"/>
      </body>
      <body name="c1" pos="0 0.3 0">
        <joint name="c1" axis="1 0 0"/>
        <geom name="c1_geom" type="capsule" fromto="0 0 0 0 0.3 0" size="0.02" mass="0.2" contype="1" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  {extra}
  <actuator>
    <motor joint="a1"/><motor joint="a2"/><motor joint="b1"/><motor joint="c1"/>
  </actuator>
  <keyframe><key name="home" qpos="{qpos}"/></keyframe>
</mujoco>
"""
NO_CONTACT = 'contype="1" conaffinity="0"'


def model(base_joint='', a_contact=NO_CONTACT, b_contact=NO_CONTACT, extra=''):
    qpos = '0 ' * (4 + (1 if base_joint else 0))
    xml = TEMPLATE.format(base_joint=base_joint, a_contact=a_contact, b_contact=b_contact, extra=extra, qpos=qpos)
    return mujoco.MjSpec.from_string(xml)


def test_arms_on_a_fixed_base_are_removed_exactly_and_the_reduced_spec_compiles():
    spec = model()
    plan = plan_reduction(spec.compile(), ['a1', 'a2'])
    assert plan.removed == ('b1', 'c1') and plan.exact and not plan.couplings
    assert (plan.kept_dofs, plan.total_dofs) == (2, 4)
    reduced = reduced_spec(spec, plan).compile()
    assert [reduced.joint(j).name for j in range(reduced.njnt)] == ['a1', 'a2']
    assert reduced.nu == 2 and reduced.nkey == 0
    assert spec.compile().njnt == 4           # the given spec is left whole


def test_a_possible_contact_with_a_moving_kept_body_keeps_the_subtree():
    plan = plan_reduction(model(b_contact='contype="1" conaffinity="1"').compile(), ['a1', 'a2'])
    assert plan.removed == ('c1',)
    assert plan.couplings['b1'][0].startswith('contact: geom b1_geom can touch a1_geom')
    # contacts off in the model: nothing touches
    spec = model(b_contact='contype="1" conaffinity="1"')
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    assert plan_reduction(spec.compile(), ['a1', 'a2']).removed == ('b1', 'c1')
    # an <exclude> between the two bodies: the contact is never made
    excluded = model(b_contact='contype="1" conaffinity="1"', extra='<contact><exclude body1="b1" body2="a1"/>'
                                                                   '<exclude body1="b1" body2="a2"/></contact>')
    assert plan_reduction(excluded.compile(), ['a1', 'a2']).removed == ('b1', 'c1')


def test_touching_only_the_world_does_not_couple_on_a_fixed_base():
    # b's geom collides with the floor (the world's): that moves nothing compared
    plan = plan_reduction(model(b_contact='contype="1" conaffinity="1"', a_contact='contype="2" conaffinity="2"')
                          .compile(), ['a1', 'a2'])
    assert 'b1' in plan.removed


def test_an_explicit_contact_pair_couples():
    spec = model(extra='<contact><pair geom1="b1_geom" geom2="a2_geom"/></contact>')
    plan = plan_reduction(spec.compile(), ['a2'])
    assert plan.couplings['b1'][0].startswith('contact: geom b1_geom can touch a2_geom')


def test_equality_and_tendon_couplings_keep_their_subtrees():
    spec = model(extra='<equality><joint joint1="b1" joint2="a1"/></equality>')
    plan = plan_reduction(spec.compile(), ['a1', 'a2'])
    assert plan.removed == ('c1',) and plan.couplings['b1'][0].startswith('equality')
    spec = model(extra='<tendon><spatial name="strap"><site site="a_site"/><site site="b_site"/></spatial></tendon>')
    plan = plan_reduction(spec.compile(), ['a1', 'a2'])
    assert plan.removed == ('c1',) and plan.couplings['b1'][0] == 'tendon: tendon strap spans it and the kept bodies'
    spec = model(extra='<tendon><fixed name="pair"><joint joint="a1" coef="1"/><joint joint="c1" coef="1"/></fixed>'
                       '</tendon>')
    assert plan_reduction(spec.compile(), ['a1', 'a2']).removed == ('b1',)
    # a spatial tendon from the world to the compared arm, wrapped around c1's geom: c1 is on its path
    spec = model(extra='<tendon><spatial name="wrapped"><site site="a_site"/><geom geom="c1_wrap"/>'
                       '<site site="anchor"/></spatial></tendon>')
    spec.worldbody.add_site(name='anchor', pos=[0, 0.6, 1])
    spec.body('c1').add_geom(name='c1_wrap', type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.03, 0, 0], pos=[0, 0.3, 0],
                             contype=0, conaffinity=0)
    plan = plan_reduction(spec.compile(), ['a1', 'a2'])
    assert plan.removed == ('b1',) and plan.couplings['c1'][0] == 'tendon: tendon wrapped spans it and the kept bodies'


def test_a_moving_base_couples_through_the_load_and_allow_load_removes_it_as_an_approximation():
    spec = model(base_joint='<joint name="base_hinge" axis="0 0 1"/>')
    compiled = spec.compile()
    plan = plan_reduction(compiled, ['a1', 'a2'])
    assert not plan.removed and plan.exact
    assert plan.couplings['b1'] == ['load: it hangs from base, which moves with base_hinge']
    assert 'the whole model (5 dofs)' in plan.describe()
    loose = plan_reduction(compiled, ['a1', 'a2'], allow_load=True)
    assert loose.removed == ('b1', 'c1') and loose.approximate == ('b1', 'c1') and not loose.exact
    assert 'approximate' in loose.describe()
    # a contact coupling is never taken as a load
    touching = plan_reduction(model(base_joint='<joint name="base_hinge" axis="0 0 1"/>',
                                    b_contact='contype="1" conaffinity="1"').compile(), ['a1'], allow_load=True)
    assert touching.removed == ('c1',)


def test_the_reduced_model_moves_the_compared_joints_as_the_whole_one():
    spec = model()
    whole = spec.compile()
    small = reduced_spec(spec, plan_reduction(whole, ['a1', 'a2'])).compile()
    trajectories = []
    for m, ctrl in ((whole, [0.3, -0.2, 0.5, -0.4]), (small, [0.3, -0.2])):
        d = mujoco.MjData(m)
        d.ctrl[:] = ctrl
        out = []
        for _ in range(500):
            mujoco.mj_step(m, d)
            out.append(d.qpos[:2].copy())
        trajectories.append(np.array(out))
    np.testing.assert_allclose(trajectories[0], trajectories[1], rtol=0, atol=1e-12)


def test_an_unknown_compared_joint_is_refused():
    with pytest.raises(ModelError, match="no joint 'nope'"):
        plan_reduction(model().compile(), ['nope'])


def test_frozen_parts_keep_their_mass_where_they_are_put_and_lose_their_joints():
    spec = model(base_joint='<joint name="base_hinge" axis="0 0 1"/>',
                 extra='<tendon><fixed name="pair"><joint joint="b1" coef="1"/><joint joint="c1" coef="1"/></fixed>'
                       '</tendon>')
    whole = spec.compile()
    assert subtree_joints(whole, 'b1') == ['b1'] and subtree_joints(whole, 'base') == ['base_hinge', 'a1', 'a2', 'b1',
                                                                                         'c1']
    at = {'b1': 0.7, 'c1': -0.4}
    frozen = frozen_spec(spec, ['b1', 'c1'], at, whole).compile()
    assert [frozen.joint(j).name for j in range(frozen.njnt)] == ['base_hinge', 'a1', 'a2']
    assert frozen.nu == 2 and frozen.ntendon == 0 and frozen.nbody == whole.nbody
    np.testing.assert_allclose(frozen.body_subtreemass, whole.body_subtreemass)
    # the frozen bodies stand where the whole model's joints put them
    d, f = mujoco.MjData(whole), mujoco.MjData(frozen)
    d.qpos[0] = f.qpos[0] = 0.3
    for name, value in at.items():
        d.qpos[whole.jnt_qposadr[mujoco.mj_name2id(whole, mujoco.mjtObj.mjOBJ_JOINT, name)]] = value
    mujoco.mj_kinematics(whole, d)
    mujoco.mj_kinematics(frozen, f)
    np.testing.assert_allclose(f.xpos, d.xpos, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(f.xquat * d.xquat, axis=1)), 1.0, atol=1e-12)
    # without positions: at the reference pose
    plain = frozen_spec(spec, ['b1']).compile()
    np.testing.assert_allclose(plain.body_pos, whole.body_pos)


def test_freezing_refuses_unknown_and_tied_joints():
    with pytest.raises(ModelError, match=r"no joint\(s\) \['nope'\] in the model to freeze"):
        frozen_spec(model(), ['b1', 'nope'])
    tied = model(extra='<equality><joint name="tie" joint1="b1" joint2="a1"/></equality>')
    with pytest.raises(ModelError, match='an equality constraint ties \\(tie\\)'):
        frozen_spec(tied, ['b1'])
    with pytest.raises(ModelError, match="no body 'nope'"):
        subtree_joints(model().compile(), 'nope')
