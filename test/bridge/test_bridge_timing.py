"""The bridge's stepping-thread timing (mujoco_bridge.timing and the node's stall reports): the sim
clock's mapping of wall, ROS and sim time, the rate meter's real-time factor, rate, lateness and
dropped time, real-time priority of the stepping thread, stall causes, and a bridge node in this
process ticked on a made-up schedule (its status shows a stall). Moved out of
test_mujoco_bridge.py (the bridge node over DDS); the clock tests need no ROS.
"""

from __future__ import annotations

import contextlib
import math
import os

import pytest

from mujoco_bridge.timing import RateMeter, SimClock, set_realtime_priority, stall_cause

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)


# --------------------------------------------------------------------- stall reporting
@contextlib.contextmanager
def bridge_driven_tick_by_tick(prefix: str):
    """A bridge node in this process on topics under ``/<prefix>``, never spun and with no
    stepping thread: the test calls its ``_tick`` on a made-up monotonic schedule."""
    import rclpy
    from rclpy.parameter import Parameter

    from mujoco_bridge.bridge_node import MujocoBridge
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ['ROS_DOMAIN_ID']))
    node = None
    try:
        node = MujocoBridge(f'{prefix}_bridge', context=context, parameter_overrides=[
            Parameter('joint_states_topic', value=f'/{prefix}/joint_states'),
            Parameter('action_name', value=f'/{prefix}/follow_joint_trajectory')])
        yield node
    finally:
        if node is not None:
            node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def status_values(status) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def test_a_stall_shows_in_the_node_real_time_factor_lateness_and_dropped_time(ros):
    """The node driven tick by tick on a made-up monotonic schedule (no stepping thread, not
    spun): a 333 ms stall (a publish blocked that long) makes the next tick 329 ms late, the lag
    beyond max_catch_up (0.1 s) is dropped, and /diagnostics says so: real-time factor below
    target over the window, the tick lateness, the sim time dropped, level WARN."""
    from diagnostic_msgs.msg import DiagnosticStatus
    with bridge_driven_tick_by_tick('stall_test') as node:
        period = 1.0 / 250.0
        node.clock.anchor(0.0, node.get_clock().now().nanoseconds, node.sim.time)
        node.meter.reset()
        t = 0.0
        for k in range(1, 501):                       # 2 s on schedule
            t = k * period
            node._tick(t, 0.0005)
        steady = node.diagnostic_status()
        values = status_values(steady)
        assert steady.level == DiagnosticStatus.OK
        assert float(values['real_time_factor_achieved']) == pytest.approx(1.0, abs=1e-3)
        assert float(values['max_tick_lateness_ms']) == pytest.approx(0.5)
        assert float(values['dropped_sim_time_s']) == 0.0
        t += 0.333                                    # the stall: the next tick starts 329 ms late
        node._tick(t, 0.329, 0.0008)                  # the process hardly ran meanwhile
        for k in range(1, 251):                       # 1 s on schedule again
            node._tick(t + k * period, 0.0005)
        status = node.diagnostic_status()
        values = status_values(status)
        # the tick before the stall had stepped ahead to its successor's time (+4 ms): the lag is
        # 333 - 4 = 329 ms, 164 whole steps (328 ms), less max_catch_up
        dropped = 0.328 - 0.1
        assert float(values['dropped_sim_time_s']) == pytest.approx(dropped, abs=1e-6)
        assert float(values['dropped_sim_time_window_s']) == pytest.approx(dropped, abs=1e-6)
        assert float(values['max_tick_lateness_ms']) == pytest.approx(329.0)
        assert float(values['max_tick_lateness_process_cpu_ms']) == pytest.approx(0.8)
        span = 3.333 - period                         # first tick to last
        assert float(values['real_time_factor_achieved']) == pytest.approx((span - dropped) / span, abs=2e-3)
        assert status.level == DiagnosticStatus.WARN
        assert 'dropped 228 ms of sim time' in status.message
        node._log_rate()                              # the log line has the same figures


# ------------------------------------------------------------------------- clock (no ROS)
def test_sim_clock_maps_wall_ros_and_sim_time():
    clock = SimClock(0.5)
    clock.anchor(mono=100.0, ros_ns=5_000_000_000, sim_time=2.0)
    assert clock.target(102.0) == pytest.approx(3.0)            # 2 wall s at RTF 0.5
    assert clock.stamp_ns(3.0) == 7_000_000_000
    assert clock.sim_time_at(7_000_000_000) == pytest.approx(3.0)
    clock.anchor(mono=110.0, ros_ns=15_000_000_000, sim_time=4.0, real_time_factor=2.0)
    assert clock.real_time_factor == 2.0 and clock.target(111.0) == pytest.approx(6.0)
    with pytest.raises(ValueError):
        SimClock(0.0)
    with pytest.raises(ValueError):
        clock.anchor(0.0, 0, 0.0, real_time_factor=math.inf)


def test_rate_meter_measures_rtf_and_rate_over_its_window():
    meter = RateMeter(window=1.0)
    assert meter.report() is None
    for k in range(301):                      # 3 s at 100 Hz, sim running at 0.9x
        meter.tick(k * 0.01, k * 0.009)
    report = meter.report()
    assert report.real_time_factor == pytest.approx(0.9)
    assert report.rate == pytest.approx(100.0)
    assert report.window == pytest.approx(1.0, abs=0.011)
    meter.reset()
    assert meter.report() is None


def _in_a_thread(function):
    """``function()`` run in a new thread (scheduling is per thread); returns its result."""
    import threading
    out = []
    thread = threading.Thread(target=lambda: out.append(function()))
    thread.start()
    thread.join()
    return out[0]


def test_set_realtime_priority_sets_sched_fifo_on_the_calling_thread_only():
    def run():
        refused = set_realtime_priority(30)
        return refused, os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    refused, policy, priority = _in_a_thread(run)
    if refused is None:
        assert (policy, priority) == (os.SCHED_FIFO, 30)
    else:                                           # no rtprio limit for this user
        assert policy == os.SCHED_OTHER and 'rtprio' in refused
    assert os.sched_getscheduler(0) == os.SCHED_OTHER            # this thread is untouched
    assert _in_a_thread(lambda: (set_realtime_priority(0), os.sched_getscheduler(0))) == (None, os.SCHED_OTHER)


def test_set_realtime_priority_explains_a_refusal_and_rejects_bad_priorities(monkeypatch):
    import errno

    def refuse(*_):
        raise PermissionError(errno.EPERM, 'Operation not permitted')
    monkeypatch.setattr(os, 'sched_setscheduler', refuse)
    refused = set_realtime_priority(50)
    assert 'SCHED_FIFO priority 50 refused (Operation not permitted)' in refused
    assert 'rtprio' in refused and 'thread_priority' in refused
    for bad in (-1, 100):
        with pytest.raises(ValueError, match='thread priority must be 0'):
            set_realtime_priority(bad)


def test_a_tick_publishes_first_then_steps_ahead_to_the_next_tick(ros):
    """The node driven tick by tick (not spun): each tick publishes the state of its own
    scheduled time, then steps ahead, so the next tick has nothing to step before publishing."""
    with bridge_driven_tick_by_tick('step_ahead_test') as node:
        period = 1.0 / 250.0
        sim0 = node.sim.time
        node.clock.anchor(0.0, node.get_clock().now().nanoseconds, sim0)
        for k in range(1, 6):
            node._tick(k * period)
            assert node._published_sim_time == pytest.approx(sim0 + k * period, abs=1e-9)
            assert node.sim.time == pytest.approx(sim0 + (k + 1) * period, abs=1e-9)


def test_stall_cause_tells_the_nodes_own_threads_from_the_machine():
    """A stall during which the process ran (the GIL held by another thread) is the node's; one
    during which it hardly ran is the operating system's or the hypervisor's."""
    own = stall_cause(0.040, 0.044, 0.038)
    machine = stall_cause(0.060, 0.064, 0.0008)
    assert 'another thread of this node' in own and '38.0 ms of CPU in the 44 ms' in own
    assert 'not running' in machine and 'hypervisor' in machine and '0.8 ms of CPU' in machine
    assert 'not running' in stall_cause(0.030, 0.0, 0.0)


def test_rate_meter_reports_the_process_cpu_of_its_latest_tick():
    meter = RateMeter(window=5.0)
    meter.tick(0.004, 0.004, lateness=0.001, process_cpu=0.003)
    meter.tick(0.008, 0.008, lateness=0.050, process_cpu=0.0007)
    meter.tick(0.012, 0.012, lateness=0.002, process_cpu=0.004)
    report = meter.report()
    assert report.max_lateness == pytest.approx(0.050)
    assert report.max_lateness_cpu == pytest.approx(0.0007)


def test_rate_meter_counts_a_stall_in_its_real_time_factor():
    """A tick 329 ms late after which 232 ms of sim time were dropped: the window's real-time
    factor falls short by the drop, and the report gives the lateness and the drop, until the
    stall leaves the window."""
    meter = RateMeter(window=5.0)
    sim = 0.0
    for k in range(1, 501):                   # 2 s at 250 Hz on schedule
        sim += 0.004
        meter.tick(k * 0.004, sim, lateness=0.001)
    sim += 0.1                                # a 333 ms stall: max_catch_up stepped, the rest dropped
    meter.tick(2.333, sim, lateness=0.329, dropped=0.233)
    for k in range(1, 251):
        sim += 0.004
        meter.tick(2.333 + k * 0.004, sim, lateness=0.001)
    report = meter.report()
    span = 3.333 - 0.004
    assert report.real_time_factor == pytest.approx((span - 0.233) / span)
    assert report.max_lateness == pytest.approx(0.329)
    assert report.dropped == pytest.approx(0.233)
    assert report.ticks == 750
    for k in range(1, 1501):                  # 6 s later the stall is out of the window
        sim += 0.004
        meter.tick(3.333 + k * 0.004, sim)
    report = meter.report()
    assert report.real_time_factor == pytest.approx(1.0)
    assert (report.max_lateness, report.dropped) == (0.0, 0.0)
