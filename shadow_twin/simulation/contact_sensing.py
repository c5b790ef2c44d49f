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

Cost (the bridge reads every label once per 250 Hz tick, beside 2 physics steps): the model's
indices are built once (:class:`ContactReader`); a read lists the contacts' geom pairs, calls
``mj_contactForce`` once per contact of a label's geom and does the rest in Python floats (some 150
operations per counted contact), one array operation turning the labels' wrenches into their body
frames. Measured by ``benchmarks/contacts.py`` (cost section: medians of back-to-back ticks, a
shared 2-core machine), the hand's five fingertips holding a can (5 counted contacts): the
reading adds about 58 us to the cell's tick of 213 us (x1.27) and 56 us to the hand alone's 116 us
(x1.48); the first implementation (some 40 array operations, vectorised over the contacts) added
210 us and 150 us. Contacts none of which is on a label add about 7 us (the cell at rest: x1.05);
no contact, nothing. What is left is mostly Python's own: the physics leaves the caches cold, an
array operation then costs 2-3 us (the arithmetic in 25 of them costs more than in floats: 83 us;
decoding ``efc_force`` in Python costs more than ``mj_contactForce``), and building the five
readings with their ten arrays about 20 us. A lower reading rate divides the cost.
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

    What depends on the model alone (each geom's labels and body, each body's root and name, the
    labels' frame bodies) is indexed once here. :meth:`read` visits only the contacts of a label's
    geom; which those are depends on the contacts' geom pairs alone, so it keeps them for the
    pairs it last saw (contacts persist from step to step). Threads may share a reader.

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
        self._frame_bodies = [b for _, b in resolved.values()]
        # per geom id, the labels (indices) it belongs to; the last entry (index -1) is a flex
        # contact's geom id -1: no label
        members: list[list[int]] = [[] for _ in range(model.ngeom + 1)]
        for j, (ids, _) in enumerate(resolved.values()):
            for geom in ids.tolist():
                members[geom].append(j)
        self._labels_of = [tuple(m) for m in members]
        self._body_names = _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody) + ['flex']   # [-1]: a flex
        self._geom_body = model.geom_bodyid.tolist() + [-1]          # geom id -1 (flex) -> body -1
        self._root = model.body_rootid.tolist() + [0]                  # body -1 (flex) -> the world
        self._flex = model.nflex > 0
        self._last: tuple[list, tuple] = ([], ([], [], [], []))      # geom pairs -> :meth:`_candidates`

    def _empty(self) -> dict[str, ContactReading]:
        return dict.fromkeys(self.labels, NO_CONTACT)

    def read(self, data: mujoco.MjData) -> dict[str, ContactReading]:
        """{label: ContactReading} of the contacts in ``data`` (after ``mj_step`` or ``mj_forward``);
        the shared :data:`NO_CONTACT` for a label no counted contact touches.

        Cost (module doc): the contacts' geom pairs listed (the pass over them skipped when they
        are those of the last read), one ``mj_contactForce`` per contact of a label's geom, the
        contacts' frames and points and the bodies' ``cvel``, ``subtree_com`` and ``xpos`` copied
        into Python floats, some 150 float operations per counted contact, one array operation.
        """
        if not data.ncon:
            return self._empty()
        contact = data.contact
        pairs = contact.geom.tolist()
        last = self._last
        if last[0] != pairs:
            last = self._last = (pairs, self._candidates(pairs))
        rows, bodies, roots, entries = last[1]
        if not rows:
            return self._empty()
        model, threshold, result = self.model, self.sensing.min_force, np.empty(6)
        forces: dict[int, list[float]] = {}      # counted contact -> force, torque on geom2 in its frame
        for i in rows:
            mujoco.mj_contactForce(model, data, i, result)
            force = result.tolist()
            if force[0] > threshold:
                forces[i] = force
        entries = [e for e in entries if e[0] in forces]
        if not entries:
            return self._empty()
        frames = contact.frame.tolist()                                    # normal, tangent 1, tangent 2
        points = contact.pos.tolist()
        velocities = data.cvel.take(bodies, axis=0).tolist()               # rot, lin at the root's subtree_com
        if self._flex and -1 in bodies:                                    # a flex vertex: taken at rest
            velocities = [[0.0] * 6 if b < 0 else v for b, v in zip(bodies, velocities)]
        centres = data.subtree_com.take(roots, axis=0).tolist()
        origins = data.xpos.take(self._frame_bodies, axis=0).tolist()
        slips: dict[int, float] = {}
        sums: list[list | None] = [None] * len(self.labels)     # per label: wrench, N, slip N, count, touching
        names = self._body_names
        for i, k, j, sign in entries:
            f0, f1, f2, t0, t1, t2 = forces[i]
            n0, n1, n2, a0, a1, a2, b0, b1, b2 = frames[i]
            p0, p1, p2 = points[i]
            slip = slips.get(i)
            if slip is None:
                # v = lin + rot x (p - subtree_com) of geom2's body minus geom1's, in the tangent plane
                w0, w1, w2, u0, u1, u2 = velocities[2 * k]
                c0, c1, c2 = centres[2 * k]
                r0, r1, r2 = p0 - c0, p1 - c1, p2 - c2
                v0, v1, v2 = u0 + w1 * r2 - w2 * r1, u1 + w2 * r0 - w0 * r2, u2 + w0 * r1 - w1 * r0
                w0, w1, w2, u0, u1, u2 = velocities[2 * k + 1]
                c0, c1, c2 = centres[2 * k + 1]
                r0, r1, r2 = p0 - c0, p1 - c1, p2 - c2
                d0, d1, d2 = u0 + w1 * r2 - w2 * r1 - v0, u1 + w2 * r0 - w0 * r2 - v1, u2 + w0 * r1 - w1 * r0 - v2
                slip = slips[i] = math.hypot(a0 * d0 + a1 * d1 + a2 * d2, b0 * d0 + b1 * d1 + b2 * d2)
            # the wrench on the label's geom (sign: geom2 +1, geom1 -1) in the world, about its frame origin
            fx, fy, fz = sign * (f0 * n0 + f1 * a0 + f2 * b0), sign * (f0 * n1 + f1 * a1 + f2 * b1), \
                sign * (f0 * n2 + f1 * a2 + f2 * b2)
            x0, x1, x2 = origins[j]
            l0, l1, l2 = p0 - x0, p1 - x1, p2 - x2
            wrench = [fx, fy, fz, sign * (t0 * n0 + t1 * a0 + t2 * b0) + l1 * fz - l2 * fy,
                      sign * (t0 * n1 + t1 * a1 + t2 * b1) + l2 * fx - l0 * fz,
                      sign * (t0 * n2 + t1 * a2 + t2 * b2) + l0 * fy - l1 * fx]
            name = names[bodies[2 * k] if sign > 0 else bodies[2 * k + 1]]
            total = sums[j]
            if total is None:
                sums[j] = [wrench, f0, slip * f0, 1, {name}]
            else:
                total[0] = [a + b for a, b in zip(total[0], wrench)]
                total[1] += f0
                total[2] += slip * f0
                total[3] += 1
                total[4].add(name)
        return self._readings(data, sums)

    def _candidates(self, pairs: list[list[int]]) -> tuple[list[int], list[int], list[int], list[tuple]]:
        """From the contacts' geom pairs ((n, 2) as lists): the contacts of a label's geom (not
        internal to all its labels) (r,), their geom1's and geom2's bodies alternating (2r,) and those
        bodies' roots (2r,), the entries (contact, index in the first list, label index, +1.0 on
        geom2 or -1.0 on geom1)."""
        labels_of, geom_body = self._labels_of, self._geom_body
        rows: list[int] = []
        bodies: list[int] = []
        entries: list[tuple[int, int, int, float]] = []
        for i, (g1, g2) in enumerate(pairs):
            in1, in2 = labels_of[g1], labels_of[g2]
            if not (in1 or in2):
                continue
            k = len(rows)
            mine = [(i, k, j, 1.0) for j in in2 if j not in in1] + [(i, k, j, -1.0) for j in in1 if j not in in2]
            if mine:
                entries += mine
                rows.append(i)
                bodies += (geom_body[g1], geom_body[g2])
        return rows, bodies, [self._root[b] for b in bodies], entries

    def _readings(self, data: mujoco.MjData, sums: list[list | None]) -> dict[str, ContactReading]:
        """The readings from the per-label sums of :meth:`read` (world wrench about the frame
        origin, N, slip N, count, touching; None: no counted contact), the wrenches turned into the
        frame bodies' frames in one array operation (R^T v: row vectors times R)."""
        touched = [j for j, total in enumerate(sums) if total is not None]
        frames = data.xmat.take([self._frame_bodies[j] for j in touched], axis=0).reshape(-1, 3, 3)
        wrench = np.array([sums[j][0] for j in touched]).reshape(-1, 2, 3) @ frames      # (t, 2, 3)
        out = self._empty()
        for row, j in enumerate(touched):
            _, normal, sliding, count, touching = sums[j]
            out[self.labels[j]] = ContactReading(True, wrench[row, 0], wrench[row, 1], sliding / normal, normal,
                                                 count, tuple(sorted(touching)))
        return out
