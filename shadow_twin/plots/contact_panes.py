"""The contact panes of the rqt plots perspective (ROS-free): what ``shadow_twin.plots.perspective``
plots when contacts are on (``shadow-twin perspective --contacts``, ``shadow-twin rqt --contacts``).

The sim bridge (``contact_sensors: hand``) publishes per label its contact outputs under
``SIM_CONTACTS_PREFIX`` and the mock hardware, the real hand's tactile stand-in, the same under
``REAL_CONTACTS_PREFIX`` (``mujoco_bridge.contact_output``): ``<prefix>/<label>/wrench``
(``geometry_msgs/WrenchStamped``, the net wrench the touched objects exert on the label's body, in its
frame, N) and ``<prefix>/<label>/slip`` (``geometry_msgs/TwistStamped``, ``twist.linear.x`` the
tangential sliding speed at the contact, m/s). Two rqt_plot panes, side by side:

* **pad normal force** (N): ``<prefix>/<label>/wrench/wrench/force/y``, real and sim per label. The
  wrench is in the body frame, where no axis is the contact normal for every contact, but the
  Shadow Hand E's distal phalanges (and its palm) have their pads on their -y side (the palm faces
  -y, and flexion turns the fingertips toward it): an object pressing a pad pushes the body along +y.
  In the hand's grasp of the can (``benchmarks/contacts.py``) the contact normals of the first,
  middle and ring fingertips and the thumb lie 40-45 deg from +y (y component 0.70-0.75), the little
  finger's, touching with its side, 64 deg. rqt_plot plots fields, not expressions (no ``|F|``);
  the monitor's statuses carry the contact states (Robot Monitor);
* **slip speed** (m/s): ``<prefix>/<label>/slip/twist/linear/x``, real and sim per label.

Labels: ``DEFAULT_CONTACT_LABELS`` (the first finger and the thumb, the tips of a pinch): two
curves per label and pane keep the panes' legends small (rqt_plot's PyQtGraph legend lists every
curve over the plot); any of the bridge's labels can be chosen (``ALL_CONTACT_LABELS``, or the
labels of a ``contact_sensors`` mapping).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.contact_sensing import DEFAULT_SENSORS, LABEL

#: The labels of the bridge's ``contact_sensors: hand``: the distal phalanges and the palm.
ALL_CONTACT_LABELS = tuple(DEFAULT_SENSORS)
#: Labels plotted by default.
DEFAULT_CONTACT_LABELS = ('ff', 'th')
#: Contact topic prefixes: the sim bridge's (``~/contacts`` of node ``mujoco_bridge``) and the mock
#: hardware's (config/mock_hardware.yaml), as the twin monitor's ``contacts.sim_prefix`` and ``real_prefix``.
SIM_CONTACTS_PREFIX, REAL_CONTACTS_PREFIX = '/mujoco_bridge/contacts', '/rh/contacts'
#: Fields plotted: the force along the pad's normal (+y of the body frame, N; module doc) and the slip (m/s).
NORMAL_FORCE_FIELD, SLIP_FIELD = 'wrench/wrench/force/y', 'slip/twist/linear/x'
#: Initial y ranges (rqt_plot extends them to the data): a fingertip's forces in a grasp are about
#: 0.5-10 N; the monitor's slip threshold is 0.01 m/s.
FORCE_Y_LIMITS, SLIP_Y_LIMITS = (-1.0, 10.0), (0.0, 0.05)


@dataclass(frozen=True)
class PaneSpec:
    """One rqt_plot pane: its dock ``title``, the ``topics`` (fields) it plots and its initial ``y_limits``."""

    title: str
    topics: tuple[str, ...]
    y_limits: tuple[float, float]


def contact_labels(values: Sequence[str]) -> list[str]:
    """``values`` as contact labels (stripped). Raises ConfigError for none, an empty or repeated one,
    or one that is not a ROS name token (a letter, then letters, digits or '_')."""
    labels = [str(v).strip() for v in values]
    if not labels or any(not label for label in labels):
        raise ConfigError(f'contact labels: give one or more, as {",".join(ALL_CONTACT_LABELS)}; got {list(values)!r}')
    bad = [label for label in labels if not LABEL.match(label)]
    if bad:
        raise ConfigError(f'contact labels {bad} are not ROS name tokens (a letter, then letters, digits or _)')
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f'contact label(s) {repeated} given more than once')
    return labels


def _prefix(prefix: str, what: str) -> str:
    text = str(prefix).strip().rstrip('/')
    if not text.startswith('/') or len(text) < 2 or '//' in text or ' ' in text:
        raise ConfigError(f'{what} must be an absolute topic name as /rh/contacts, got {prefix!r}')
    return text


def contact_panes(labels: Sequence[str] = DEFAULT_CONTACT_LABELS, real_prefix: str = REAL_CONTACTS_PREFIX,
                  sim_prefix: str = SIM_CONTACTS_PREFIX) -> list[PaneSpec]:
    """[pad normal force pane, slip speed pane] of ``labels`` (module doc), each with per label the
    real then the sim field. Raises ConfigError for bad labels or a prefix that is not absolute."""
    labels = contact_labels(labels)
    real, sim = _prefix(real_prefix, 'the real contact prefix'), _prefix(sim_prefix, 'the sim contact prefix')

    def fields(field: str) -> tuple[str, ...]:
        return tuple(f'{prefix}/{label}/{field}' for label in labels for prefix in (real, sim))
    names = ', '.join(labels)
    return [PaneSpec(f'pad normal force (N, +y): real vs sim: {names}', fields(NORMAL_FORCE_FIELD), FORCE_Y_LIMITS),
            PaneSpec(f'slip speed (m/s): real vs sim: {names}', fields(SLIP_FIELD), SLIP_Y_LIMITS)]
