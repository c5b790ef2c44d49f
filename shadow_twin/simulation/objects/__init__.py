"""Objects that follow the real world (issue 36): a scene object whose pose a source gives (motion
capture, AprilTag detections: a ``geometry_msgs/PoseStamped`` topic or a TF frame, mapped to sim time
by the ROS layer) follows it in the sim, with contacts that stay physical. ROS-free.

* :mod:`.poses`: quaternions, a source's :class:`PoseSample`, :func:`pose_error` (sim vs source);
* :mod:`.gate`: :class:`PoseGate`, what a source's samples may be (NaN, a non-unit quaternion, stamps
  going back or too far ahead, jumps beyond a physical speed) and when it is silent, each kind of
  problem reported once;
* :mod:`.track`: :class:`PoseTrack`, the accepted samples' :class:`Motion` (pose, velocity,
  acceleration) at a sim time;
* :mod:`.weld`: :func:`add_following`, a mocap target and a soft weld per followed object, added to a
  spec (the figures that justify them);
* :mod:`.follower`: :class:`ObjectFollower`, which moves the targets, on a leash, and switches the
  welds;
* :mod:`.motion_capture`: :class:`MotionCapture`, a capture system's frames (rate, latency, noise): the
  mock hardware's stand-in for the real objects' poses.

Use::

    spec = build_cell_spec()
    add_objects(spec, scene)
    add_following(spec, ['can'])
    model = spec.compile()
    follower = ObjectFollower(model)
    verdict = follower.offer('can', stamp, position, quat, now=data.time)    # each message
    warnings = follower.update(data)                                          # before each step
    mujoco.mj_step(model, data)
    errors = follower.errors(data)                                            # the monitor's
"""

from shadow_twin.simulation.objects.follower import ObjectFollower
from shadow_twin.simulation.objects.gate import GateLimits, PoseGate, Verdict
from shadow_twin.simulation.objects.motion_capture import CaptureConfig, MotionCapture
from shadow_twin.simulation.objects.poses import PoseSample, angle_between, pose_error
from shadow_twin.simulation.objects.track import Motion, PoseTrack
from shadow_twin.simulation.objects.weld import add_following, follow_name, followed_objects, target_name

__all__ = ['CaptureConfig', 'GateLimits', 'Motion', 'MotionCapture', 'ObjectFollower', 'PoseGate', 'PoseSample',
           'PoseTrack', 'Verdict', 'add_following', 'angle_between', 'follow_name', 'followed_objects', 'pose_error', 'target_name']
