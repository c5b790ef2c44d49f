"""The names a scene object's elements take in a model, and the marker that finds the objects again.

An object ``N`` is, in the model (MjSpec or compiled MjModel, and in its MJCF):

* body ``N``: the object's frame, at the pose of the scene file;
* geom ``N``: its one geom (collision and visual);
* free joint ``N_free`` when it is free (as the cell's base: ``base_free``);
* mesh asset ``N_mesh`` when it is a mesh;
* the marker: the custom text ``scene_object:N`` (MJCF ``<custom><text name="scene_object:N"
  data="free"/></custom>``, data ``free`` or ``fixed``). Custom texts are written by
  ``MjSpec.to_xml()``, parsed back by ``MjSpec.from_string`` and kept in the compiled model
  (``MjModel.ntext``), so the objects stay findable in a model the bridge reloads from MJCF text;
  a body named like an object but without its marker is not an object.
"""

from __future__ import annotations

import mujoco

#: Name prefix of the markers (custom texts) of the scene's objects.
MARKER_PREFIX = 'scene_object:'
#: Marker data of a free and of a fixed object.
FREE, FIXED = 'free', 'fixed'


def free_joint_name(name: str) -> str:
    """Name of object ``name``'s free joint (``<name>_free``)."""
    return f'{name}_free'


def mesh_name(name: str) -> str:
    """Name of object ``name``'s mesh asset (``<name>_mesh``)."""
    return f'{name}_mesh'


def marker_name(name: str) -> str:
    """Name of object ``name``'s marker, a custom text (``scene_object:<name>``)."""
    return MARKER_PREFIX + name


def object_kinds(spec_or_model: mujoco.MjSpec | mujoco.MjModel) -> dict[str, str]:
    """{object name: ``'free'`` or ``'fixed'``} of the scene objects in a spec or a compiled model, in the
    order they were added: the markers whose body is present (module doc)."""
    if isinstance(spec_or_model, mujoco.MjSpec):
        spec = spec_or_model
        return {text.name[len(MARKER_PREFIX):]: text.data for text in spec.texts
                if text.name.startswith(MARKER_PREFIX) and spec.body(text.name[len(MARKER_PREFIX):]) is not None}
    model = spec_or_model
    out = {}
    for index in range(model.ntext):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_TEXT, index) or ''
        if not name.startswith(MARKER_PREFIX):
            continue
        body = name[len(MARKER_PREFIX):]
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body) < 0:
            continue
        start = int(model.text_adr[index])
        out[body] = bytes(model.text_data[start:start + int(model.text_size[index]) - 1]).decode()
    return out


def object_names(spec_or_model: mujoco.MjSpec | mujoco.MjModel) -> list[str]:
    """Names of the scene objects in a spec or a compiled model, in the order they were added."""
    return list(object_kinds(spec_or_model))
