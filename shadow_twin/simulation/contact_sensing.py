"""Contact sensing of the simulated hand (ROS-free): per sensing label (a fingertip, the palm, any
body or geom the configuration names), contact yes or no, the contact wrench in the label's body
frame and the slip speed at the contact, read from MuJoCo's contacts (``data.contact``) after a
step or ``mj_forward``.

A label is a list of body or geom name globs (:mod:`shadow_twin.common.globs`: a glob matching a
body takes all of its geoms; one matching a geom takes that geom). Its *geoms* G are the union;
its *frame body* b is the first glob's first match (the body itself, or the matched geom's body).
The default labels (:data:`DEFAULT_SENSORS`) are the Shadow Hand E's five distal phalanges and the
palm: ``ff``, ``mf``, ``rf``, ``lf``, ``th``, ``palm`` (the short names of Shadow's finger prefixes;
the wrench's frame is the body ``rh_ffdistal``... ``rh_palm``, :attr:`ContactReader.frames`).

Per label, from the contacts with exactly one geom in G (a contact of two of its own geoms is
internal: its forces cancel) whose normal force exceeds ``min_force`` (the *counted* contacts; a
penetration without force, e.g. of geoms already moving apart, is not contact):

* ``in_contact``: at least one counted contact; ``n_contacts``; ``touching``: the other geoms' bodies.
* ``force``, ``torque``: the net wrench the touched objects exert on G, about b's origin, in b's
  frame (N, N m). ``mujoco.mj_contactForce`` gives each contact's force (and with condim 4 or 6 its
  torsional and rolling torques) in the contact frame (rows of ``contact.frame``: the normal, from
  geom1 to geom2, then the two tangents), acting on geom2; geom1 takes its opposite. That is how
  ``mj_rnePostConstraint`` adds contacts into ``cfrc_ext``: a label made of one body's geoms reads
  that body's ``cfrc_ext`` (moved to its origin) when all its contacts count.
* ``slip``: the tangential sliding speed at the contact (m/s): the velocity of geom2's body minus
  geom1's at the contact point ``contact.pos`` (the rigid-body transport of ``cvel`` that
  ``mj_objectVelocity`` applies: v + w x (p - subtree_com)), its normal component removed. Over
  several contacts the normal-force-weighted mean: the speed the load slides at; a contact that
  appears at the threshold enters with almost no weight, so the value does not jump as light
  contacts come and go (a rolling object, whose contact point does not slide, reads ~0).
* ``normal_force``: the sum of the counted contacts' normal forces, N (what a pressure sensor reads).

After ``mj_step``, ``data.contact``, ``xpos``, ``cvel`` all belong to the state at the start of the
step (``qpos``/``qvel`` are already the next one): the reading is consistent, one step old.

Cost: one ``mj_contactForce`` call per contact of a label, the rest vectorised over the contacts
(numpy: some 40 array operations, whatever the number of contacts). Measured (medians, on a
shared 2-core machine): the built-in hand alone with 10 contacts (6 of them on the six default
labels, pyramidal cones), :meth:`ContactReader.read` costs about 4x one ``mj_step`` of that model
(whose step is cheap); in the cell (``build_cell_spec``: hand, UR5, MiR250) with the same objects,
about 2.5x one cell step. Without contacts it costs about 0.03x; with contacts but none on a label,
a few array operations. At 250 Hz beside physics at 500 Hz (2 steps per reading) that is at most
about twice the physics' own cost; a lower reading rate divides it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Mapping

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import matching

#: The default labels: the Shadow Hand E's distal phalanges and palm (body names of the built-in
#: model and Shadow's description).
DEFAULT_SENSORS: dict[str, tuple[str, ...]] = {
    'ff': ('rh_ffdistal',), 'mf': ('rh_mfdistal',), 'rf': ('rh_rfdistal',), 'lf': ('rh_lfdistal',),
    'th': ('rh_thdistal',), 'palm': ('rh_palm',),
}
#: N: the normal force over which a contact counts. 0.01 N is the weight of 1 g: far below a
#: fingertip's forces in a grasp (about 0.5-10 N), so a grazing touch barely counts and a grasp always does.
DEFAULT_MIN_FORCE = 0.01
#: A label: a ROS name token (it names topics and frames downstream).
LABEL = re.compile(r'[A-Za-z][A-Za-z0-9_]*\Z')


@dataclass(frozen=True)
class SensingConfig:
    """What to sense: ``sensors`` {label: body or geom name globs} in order (default
    :data:`DEFAULT_SENSORS`) and ``min_force`` (N, >= 0: a contact counts above it). Build it with
    :func:`parse_sensing`, which checks it."""

    sensors: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_SENSORS))
    min_force: float = DEFAULT_MIN_FORCE


def parse_sensing(sensors: Mapping | None = None, min_force=DEFAULT_MIN_FORCE) -> SensingConfig:
    """A checked :class:`SensingConfig`.

    Args:
        sensors: {label: glob or list of globs} (None: :data:`DEFAULT_SENSORS`). A label is a ROS
            name token (letters, digits, ``_``, starting with a letter).
        min_force: N, a finite number >= 0.
    Raises:
        ConfigError: (one line) not a mapping, no label, a bad label, a label without globs, a glob
            that is not a non-empty string, ``min_force`` not a finite number >= 0.
    """
    if sensors is None:
        sensors = DEFAULT_SENSORS
    if not isinstance(sensors, Mapping) or not sensors:
        raise ConfigError(f'contact sensors: expected a mapping {{label: [body or geom globs]}}, got {sensors!r}')
    out: dict[str, tuple[str, ...]] = {}
    for label, globs in sensors.items():
        if not isinstance(label, str) or not LABEL.match(label):
            raise ConfigError(f'contact sensors: label {label!r} is not a name (letters, digits, _; a letter first)')
        globs = (globs,) if isinstance(globs, str) else globs
        if not isinstance(globs, (list, tuple)) or not globs:
            raise ConfigError(f'contact sensors: label {label!r} needs a list of body or geom globs, got {globs!r}')
        bad = [g for g in globs if not isinstance(g, str) or not g.strip()]
        if bad:
            raise ConfigError(f'contact sensors: label {label!r}: glob {bad[0]!r} is not a non-empty string')
        out[label] = tuple(globs)
    if isinstance(min_force, bool) or not isinstance(min_force, (int, float)) or not math.isfinite(min_force) \
            or min_force < 0:
        raise ConfigError(f'contact sensors: min_force must be a finite number >= 0 N, got {min_force!r}')
    return SensingConfig(out, float(min_force))


@dataclass(frozen=True, slots=True)
class ContactReading:
    """One label's contact state (module doc).

    Attributes:
        in_contact: a contact over the force threshold.
        force: (3,) N, torque: (3,) N m: the net wrench on the label, about its frame body's
            origin, in that body's frame (zeros without contact).
        slip: m/s, the normal-force-weighted mean tangential sliding speed at the counted contacts (0
            without contact).
        normal_force: N, the sum of the counted contacts' normal forces.
        n_contacts: counted contacts.
        touching: the other bodies' names, sorted, without repeats.
    """

    in_contact: bool
    force: np.ndarray
    torque: np.ndarray
    slip: float
    normal_force: float
    n_contacts: int
    touching: tuple[str, ...]


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


#: The reading of a label without contact (shared: its arrays are read-only).
NO_CONTACT = ContactReading(False, _frozen(np.zeros(3)), _frozen(np.zeros(3)), 0.0, 0.0, 0, ())


def _names(model: mujoco.MjModel, kind: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(model, kind, k) or '' for k in range(count)]


def sensing_geoms(model: mujoco.MjModel, sensing: SensingConfig) -> dict[str, tuple[np.ndarray, int]]:
    """{label: (geom ids (G,), frame body id)} of ``sensing`` in ``model`` (module doc).

    Raises:
        ConfigError: (one line) a glob that matches no body or geom of the model, or a label whose
            geoms all have contype = conaffinity = 0 (they touch nothing).
    """
    body_id = {name: k for k, name in enumerate(_names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody)) if name}
    geom_id = {name: k for k, name in enumerate(_names(model, mujoco.mjtObj.mjOBJ_GEOM, model.ngeom)) if name}
    out = {}
    for label, globs in sensing.sensors.items():
        members: set[int] = set()
        frame = None
        for glob in globs:
            hit_bodies, hit_geoms = matching(body_id, [glob]), matching(geom_id, [glob])     # named ones, in id order
            if not hit_bodies and not hit_geoms:
                raise ConfigError(f'contact sensors: label {label!r}: glob {glob!r} matches no body or geom '
                                  f'of the model')
            ids = [body_id[b] for b in hit_bodies]
            members.update(np.flatnonzero(np.isin(model.geom_bodyid, ids)).tolist())
            members.update(geom_id[g] for g in hit_geoms)
            if frame is None:
                frame = ids[0] if ids else int(model.geom_bodyid[geom_id[hit_geoms[0]]])
        ids = np.array(sorted(members), dtype=int)
        if not len(ids) or not np.any((model.geom_contype[ids] != 0) | (model.geom_conaffinity[ids] != 0)):
            raise ConfigError(f'contact sensors: label {label!r}: no geom of {", ".join(globs)} can collide '
                              f'(none, or contype = conaffinity = 0)')
        out[label] = (ids, frame)
    return out


class ContactReader:
    """Reads every label's :class:`ContactReading` from a model's data (module doc).

    Args:
        model: the compiled model the data belong to (not modified; its geom and body ids are kept).
        sensing: the labels and the force threshold (default :class:`SensingConfig`: the Shadow
            Hand E's fingertips and palm).
    Raises:
        ConfigError: (one line) a glob matching nothing in ``model`` (:func:`sensing_geoms`).
    """

    def __init__(self, model: mujoco.MjModel, sensing: SensingConfig | None = None) -> None:
        self.sensing = SensingConfig() if sensing is None else sensing
        self.model = model
        resolved = sensing_geoms(model, self.sensing)
        #: The labels, in the configuration's order.
        self.labels: tuple[str, ...] = tuple(resolved)
        #: {label: the name of its frame body} (the wrench's frame, e.g. a WrenchStamped's frame_id).
        self.frames: dict[str, str] = {label: mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or f'body {b}'
                                       for label, (_, b) in resolved.items()}
        #: {label: its geom ids}.
        self.geoms: dict[str, np.ndarray] = {label: ids for label, (ids, _) in resolved.items()}
        self._frame_bodies = np.array([b for _, b in resolved.values()], dtype=int)
        # (ngeom + 1, L) membership; the last row (index -1) is for flex contacts' geom id -1: no label
        self._member = np.zeros((model.ngeom + 1, len(self.labels)))
        for j, (ids, _) in enumerate(resolved.values()):
            self._member[ids, j] = 1.0
        self._body_names = _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody) + ['flex']   # [-1]: a flex
        self._geom_body = np.append(model.geom_bodyid, -1)           # geom id -1 (flex) -> 'flex'
        self._root = np.append(model.body_rootid, 0)                   # body -1 (flex) -> the world
        self._flex = model.nflex > 0

    def _empty(self) -> dict[str, ContactReading]:
        return dict.fromkeys(self.labels, NO_CONTACT)

    def read(self, data: mujoco.MjData) -> dict[str, ContactReading]:
        """{label: ContactReading} of the contacts in ``data`` (after ``mj_step`` or ``mj_forward``)."""
        if data.ncon == 0:
            return self._empty()
        contact = data.contact
        pair = contact.geom                                                      # (n, 2) geom ids
        side = self._member[pair[:, 1]] - self._member[pair[:, 0]]              # (n, L): +1 geom2, -1 geom1
        rows = np.flatnonzero(side.any(axis=1))
        if not len(rows):
            return self._empty()
        local = np.empty((len(rows), 6))
        for k, i in enumerate(rows.tolist()):
            mujoco.mj_contactForce(self.model, data, i, local[k])
        over = local[:, 0] > self.sensing.min_force
        if not over.any():
            return self._empty()
        rows, local = rows[over], local[over]
        weight = side[rows]                                                      # (k, L) signed, counted contacts
        normal = local[:, 0]
        pair, frame, pos = pair[rows], contact.frame[rows].reshape(-1, 3, 3), contact.pos[rows]
        world = np.einsum('kij,kci->kcj', frame, local.reshape(-1, 2, 3))      # (k, 2, 3): force, torque on geom2
        force = weight.T @ world[:, 0]                                           # (L, 3), world
        moment = weight.T @ (_cross(pos, world[:, 0]) + world[:, 1])             # about the world origin
        moment -= _cross(data.xpos[self._frame_bodies], force)                   # about each frame body's origin
        rot = data.xmat[self._frame_bodies].reshape(-1, 3, 3)                    # body -> world
        body = np.einsum('lji,lcj->lci', rot, np.stack((force, moment), axis=1))  # (L, 2, 3) in the body frame
        load = np.abs(weight) * normal[:, None]                                  # (k, L)
        total = load.sum(axis=0)
        slip = (self._slip(data, pair, pos, frame[:, 0]) @ load) / np.where(total > 0, total, 1.0)
        bodies = self._geom_body[pair].tolist()
        touching: list[set] = [set() for _ in self.labels]
        for (b1, b2), signs in zip(bodies, weight.tolist()):
            for j, sign in enumerate(signs):
                if sign:
                    touching[j].add(self._body_names[b1 if sign > 0 else b2])
        count, slip, total = np.count_nonzero(weight, axis=0).tolist(), slip.tolist(), total.tolist()
        return {label: ContactReading(True, body[j, 0], body[j, 1], slip[j], total[j], count[j],
                                      tuple(sorted(touching[j]))) if count[j] else NO_CONTACT
                for j, label in enumerate(self.labels)}

    def _slip(self, data: mujoco.MjData, pair: np.ndarray, pos: np.ndarray, normal: np.ndarray) -> np.ndarray:
        """(k,) m/s: the tangential speed of geom2's body relative to geom1's at the contact points
        ``pos`` ((k, 3)) with unit normals ``normal`` ((k, 3)): |n x (v2 - v1)|."""
        bodies = self._geom_body[pair].ravel()                                   # (2k,); -1: a flex
        cvel = data.cvel[bodies]                                                 # rot, lin at subtree_com
        if self._flex:
            cvel[bodies < 0] = 0.0                                               # a flex vertex: taken at rest
        lever = np.repeat(pos, 2, axis=0) - data.subtree_com[self._root[bodies]]
        velocity = cvel[:, 3:] + _cross(cvel[:, :3], lever)                     # (2k, 3) at the points, world
        sliding = _cross(normal, velocity[1::2] - velocity[0::2])
        return np.sqrt(np.einsum('ki,ki->k', sliding, sliding))


#: The Levi-Civita symbol: cross(a, b)_i = eps_ijk a_j b_k.
_EPS = np.zeros((3, 3, 3))
_EPS[0, 1, 2] = _EPS[1, 2, 0] = _EPS[2, 0, 1] = 1.0
_EPS[0, 2, 1] = _EPS[2, 1, 0] = _EPS[1, 0, 2] = -1.0


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, 3): the rows of a x b ((n, 3) each); one einsum, several times faster than ``np.cross`` on
    the few rows a read has."""
    return np.einsum('ijk,nj,nk->ni', _EPS, a, b)
