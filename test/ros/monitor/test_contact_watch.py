"""The twin monitor's contacts (contacts.enabled): fed the sim's and the real hand's contact outputs
(here published by the test, as the bridges would, on stamps it chooses), it reports each label's
contact agreement and warns of slip in /diagnostics at once, and drops what is malformed."""

from __future__ import annotations

import math
import time

import pytest

from support import cell as cell_helpers

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

SIM, REAL = '/mujoco_bridge/contacts', '/rh/contacts'
RATE = 100.0


@pytest.fixture(scope='module')
def watched(ros, tmp_path_factory):
    """The monitor watching contacts; yields (process, diagnostics recorder, publishers {(side, kind): pub})."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import TwistStamped, WrenchStamped
    helpers, client = ros
    diagnostics = client.record(DiagnosticArray, '/diagnostics', depth=2000)
    proc = cell_helpers.monitor(tmp_path_factory.mktemp('contact_watch'), 'twin_monitor.yaml', '-p',
                                'contacts.enabled:=true', '-p', 'diagnostics_period:=5.0')
    if not helpers.wait_until(lambda: 'contacts: ff, mf' in proc.output() or not proc.alive(), 30.0):
        proc.stop()
        pytest.fail(f'the monitor did not start its contact watch:\n{proc.output()}')
    pubs = {(side, kind): client.node.create_publisher(msg, f'{prefix}/ff/{kind}', 10)
            for side, prefix in (('sim', SIM), ('real', REAL))
            for kind, msg in (('wrench', WrenchStamped), ('slip', TwistStamped))}
    assert helpers.wait_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 10.0)
    yield proc, diagnostics, pubs
    assert proc.alive(), proc.output()
    assert proc.stop() == 0, proc.output()


def publish(pubs, side: str, stamp: float, force: float, slip: float) -> None:
    from geometry_msgs.msg import TwistStamped, WrenchStamped
    wrench, twist = WrenchStamped(), TwistStamped()
    sec = math.floor(stamp)
    for msg in (wrench, twist):
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(sec), int(round((stamp - sec) * 1e9))
        msg.header.frame_id = 'rh_ffdistal'
    wrench.wrench.force.y = force
    twist.twist.linear.x = slip
    pubs[(side, 'wrench')].publish(wrench)
    pubs[(side, 'slip')].publish(twist)
    time.sleep(0.5 / RATE)           # paced as a stream (the subscriptions keep 10): what is judged is the stamps


def level_of(level) -> int:
    return level[0] if isinstance(level, bytes) else int(level)


def ff_statuses(diagnostics, since: int = 0):
    return [(level_of(s.level), s.message, {v.key: v.value for v in s.values})
            for _, m in diagnostics.snapshot()[since:] for s in m.status if s.name == 'twin_monitor: contact: ff']


def test_slip_of_the_held_object_warns_at_once_and_agreement_is_reported(ros, watched):
    helpers, client = ros
    proc, diagnostics, pubs = watched
    t0 = 1000.0
    count = len(diagnostics.snapshot())
    for k in range(40):                          # 0.4 s held, both sides in contact, nothing slides
        publish(pubs, 'sim', t0 + k / RATE, 2.0, 0.0)
        publish(pubs, 'real', t0 + k / RATE, 1.5, 0.0)
    # malformed and out-of-order samples: dropped, never followed
    publish(pubs, 'real', t0 + 0.1, 1.5, 0.5)                     # a stamp back in time
    publish(pubs, 'real', t0 + 0.395, math.nan, math.nan)         # NaN
    for k in range(40, 60):                      # then the real object slides at 5 cm/s for 0.2 s
        publish(pubs, 'sim', t0 + k / RATE, 2.0, 0.0)
        publish(pubs, 'real', t0 + k / RATE, 1.5, 0.05)
    assert helpers.wait_until(lambda: any(level == 1 for level, *_ in ff_statuses(diagnostics, count)), 10.0), \
        proc.output()[-2000:]
    level, message, values = next(st for st in ff_statuses(diagnostics, count) if st[0] == 1)     # WARN
    assert message == 'slipping (real)' and values['slipping'] == 'real'
    assert float(values['agreement']) == 1.0 and int(values['matched']) >= 30       # both in contact throughout
    assert helpers.wait_until(lambda: 'real ff: slipping since 1000.4' in proc.output(), 5.0), proc.output()[-2000:]
    assert proc.alive()
