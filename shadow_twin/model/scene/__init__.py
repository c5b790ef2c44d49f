"""The scene: objects declared in a YAML file (``config/scene.yaml`` for the cell,
``config/scene_hand.yaml`` for the hand alone) and added to any of the project's MuJoCo models with
``MjSpec``, so that the sim, the mock hardware, the preview and the calibration see the same objects.

A scene file::

    scene:
      objects:
        - name: can                    # the object's body and geom; letters, digits, _ . -
          shape: cylinder              # box | cylinder | sphere | capsule | mesh
          size: [0.033, 0.0575]        # m, MuJoCo's geom size: box half-sizes x y z; cylinder, capsule
                                       # radius and half-length (along z); sphere radius
          mass: 0.35                   # kg; or density (kg/m^3): exactly one
          friction: {sliding: 0.8, torsional: 0.005, rolling: 0.0}
          frame: cabinet               # world | odom | a body of the model
          xyz: [-0.15, -0.13, 0.4575]  # m, in frame
          rpy: [0.0, 0.0, 0.0]         # rad, URDF roll-pitch-yaw: R = Rz(y) Ry(p) Rx(r)
          free: true                   # a free 6-DoF body; false: fixed to frame's body

Every key of an object (:class:`ObjectConfig`):

* ``name`` (required), ``shape`` (required), ``size`` (m; not for a mesh);
* ``mesh``: an STL (binary) or OBJ file, relative to the scene file's folder, for ``shape: mesh``;
  ``scale``: one factor or three (x y z), default 1 (the file's units are m); the object's frame is
  the file's frame;
* ``mass`` (kg) with an optional ``inertia``: principal moments (kg m^2) about the centre of mass along
  the object's axes (default: those of a uniform solid), or ``density`` (kg/m^3; mass = density x
  volume): exactly one of the two; MuJoCo computes them (:mod:`shadow_twin.model.scene.geometry`);
* ``friction``: ``{sliding, torsional, rolling}`` (torsional and rolling in m) or MuJoCo's list of three,
  default sliding 1.0 (MuJoCo's), torsional 0, rolling 0;
* ``condim``: 1, 3, 4 or 6; default the smallest of 3, 4 and 6 that uses every non-zero friction
  coefficient (4 with a torsional friction, 6 with a rolling one); a condim that would ignore a
  non-zero coefficient given is refused;
* ``solref``: [time constant s, damping ratio] (default MuJoCo's [0.02, 1]) or [-stiffness, -damping];
  ``solimp``: [dmin, dmax, width m] or with [midpoint, power] (default MuJoCo's [0.9, 0.95, 0.001, 0.5, 2]);
* ``rgba``: four numbers in [0, 1] (default MuJoCo's grey);
* ``frame`` (default world), ``xyz`` (m), ``rpy`` (rad): the pose of the object's frame (the geom's
  centre; a mesh's file origin); ``free`` (default true).

An object's contacts with the robots and the floor take the object's friction, condim, solref and
solimp (its geom's priority is above theirs; :data:`shadow_twin.model.scene.geometry.PRIORITY`).
A bad value is one ConfigError naming the file, the object and the key.

In the model (:mod:`shadow_twin.model.scene.names`): body ``N`` and geom ``N``, free joint ``N_free``,
mesh ``N_mesh``, and a marker (custom text ``scene_object:N``) by which :func:`object_names` finds the
objects in a spec, a compiled model, or a model reparsed from ``MjSpec.to_xml()``. Where a frame puts
an object (a free object in a body's frame is placed where that body is at the start):
:mod:`shadow_twin.model.scene.build`.

Use::

    spec = build_cell_spec()
    add_objects(spec, SceneConfig.from_yaml('config/scene.yaml'))
    model = spec.compile()
    # the mock hardware's objects, with other contact parameters:
    add_objects(mock_spec, SceneConfig.from_yaml('config/scene.yaml').scaled(friction=0.6, mass=1.3))
    remove_object(spec, 'can')
"""

from shadow_twin.model.scene.build import add_objects, remove_object
from shadow_twin.model.scene.config import ObjectConfig, SceneConfig
from shadow_twin.model.scene.names import free_joint_name, object_kinds, object_names

__all__ = ['ObjectConfig', 'SceneConfig', 'add_objects', 'free_joint_name', 'object_kinds', 'object_names',
           'remove_object']
