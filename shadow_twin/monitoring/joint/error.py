"""ROS-free core of the twin monitor (``shadow_twin.ros.monitor.node``): how far the sim is from the robot.

* :class:`JointSample`: one joint state of a stream: stamp ``t`` (s), joint names
  (J,), positions (J,) rad, velocities (J,) rad/s (NaN where a message had none).
* :class:`JointStateHistory`: the recent samples of one stream, time-ordered and
  bounded in age and length; :meth:`JointStateHistory.at` interpolates positions
  and velocities linearly at a time ``t``.
* :func:`joint_error`: sim minus real for the joints in both samples, in the
  real sample's joint order; :func:`merge_errors`: the errors of several real
  streams in one; :func:`aligned`: which real sample to compare next, and the sim
  interpolated at its stamp.
* :class:`ErrorWindow`: per joint, over the last ``window`` s of errors: RMS of
  the position error (rad) and of the velocity error (rad/s), max |position
  error| (rad) and the sample count.
* :class:`Thresholds`: warn / error levels (rad, RMS position error), a default
  pair and per-joint-glob overrides (fnmatch on ROS joint names, case-sensitive),
  validated (error >= warn > 0).
* :class:`SimRealMonitor`: all of it together, as the node uses it: feed the sim
  and one or more real streams (e.g. a UR driver's ``/joint_states`` at 125 Hz and
  a hand driver's ``/rh/joint_states`` at 250 Hz), :meth:`SimRealMonitor.update`
  computes the time-aligned error of each real stream's newest sample (each on its
  own stamps) and returns the newest comparison of every joint,
  :meth:`SimRealMonitor.report` gives a level per joint and a summary.

Levels are those of ``diagnostic_msgs/DiagnosticStatus``: :data:`OK` 0,
:data:`WARN` 1, :data:`ERROR` 2, :data:`STALE` 3. A joint is OK below its warn
threshold, WARN from warn (inclusive) to below error, ERROR from error
(inclusive); STALE when the joint's real stream or the sim has been silent for
``stale_after`` s, nothing has arrived yet, or the window holds no error sample of
the joint. The mobile base's pose error is :mod:`shadow_twin.monitoring.base_error`.

Units: positions rad, velocities rad/s, times s.

Modules (their public names are re-exported here, so ``from shadow_twin.monitoring.joint.error
import X`` keeps working): :mod:`~shadow_twin.monitoring.joint.samples` (:class:`JointSample`,
:class:`JointStateHistory`), :mod:`~shadow_twin.monitoring.joint.comparison` (:func:`joint_error`,
:func:`merge_errors`, :func:`aligned`, :class:`ErrorWindow`), :mod:`~shadow_twin.monitoring.thresholds`
(levels, :class:`Thresholds`) and :mod:`~shadow_twin.monitoring.sim_real_monitor` (:class:`SimRealMonitor`).
"""

from shadow_twin.monitoring.joint.comparison import (ErrorWindow, JointError, JointStats, aligned, joint_error,
                                                     merge_errors)
from shadow_twin.monitoring.joint.samples import JointSample, JointStateHistory
from shadow_twin.monitoring.sim_real_monitor import (JointReport, MonitorReport, RealStream, SimRealMonitor,
                                                     stale_phrase)
from shadow_twin.monitoring.thresholds import (DEFAULT_ERROR, DEFAULT_WARN, ERROR, LEVEL_NAMES, OK, STALE, WARN,
                                               Threshold, Thresholds, checked_threshold)

__all__ = [
    'DEFAULT_ERROR', 'DEFAULT_WARN', 'ERROR', 'LEVEL_NAMES', 'OK', 'STALE', 'WARN', 'ErrorWindow', 'JointError',
    'JointReport', 'JointSample', 'JointStateHistory', 'JointStats', 'MonitorReport', 'RealStream', 'SimRealMonitor',
    'Threshold', 'Thresholds', 'aligned', 'checked_threshold', 'joint_error', 'merge_errors', 'stale_phrase',
]
