"""The twin monitor's contacts and slip: ROS side of :mod:`shadow_twin.monitoring.slip` (a part of
``shadow_twin.ros.monitor.node``), on with ``contacts.enabled``.

* Takes, per label of ``contacts.labels`` (ff mf rf lf th palm), the contact outputs of the sim
  bridge (``contacts.sim_prefix``) and of the real hand (``contacts.real_prefix``: its tactile
  signals mapped to the same topics, or the mock hardware's): ``<prefix>/<label>/wrench``
  (``WrenchStamped``: in contact when its force exceeds ``contacts.min_force``) and
  ``<prefix>/<label>/slip`` (``TwistStamped``, ``linear.x`` m/s), judged on their stamps.
* Contact agreement: per label, the fraction of real samples whose contact state the sim's
  nearest sample (within 20 ms of stamp) shares, over ``contacts.agreement_window`` s.
* Slip: a label whose real or sim contact slides faster than
  ``contacts.slip_threshold`` for ``contacts.slip_hold`` s of stamps slips: a warning in the log and
  ``/diagnostics`` at once (not at the next period: a slipping object moves on meanwhile).
* ``/diagnostics``: per label ``twin_monitor: contact: <label>``: OK; WARN while it slips or the
  agreement is below ``contacts.agreement_warn``; STALE without a message for ``stale_after`` s.
"""

from __future__ import annotations

import math
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistStamped, WrenchStamped

from shadow_twin.common.stamps import to_seconds
from shadow_twin.monitoring.slip import ContactAgreement, SlipWatch
from shadow_twin.monitoring.thresholds import OK, STALE, WARN
from shadow_twin.ros.guard import guarded_subscription

#: Status name after the node's name: ``twin_monitor: contact: ff``.
STATUS_PREFIX = 'contact: '
SOURCES = ('real', 'sim')
#: Fewest matched samples before a low agreement warns.
MIN_MATCHED = 10


class ContactMonitor:
    """Contact agreement and slip warnings of ``node`` (its ``contacts.*`` settings; module doc).

    Args:
        node: the twin monitor node (typed ``settings``).
        status: builds a ``DiagnosticStatus`` from (level, name, message, values).
        publish_diagnostics: publishes a ``DiagnosticArray`` (the node's ``/diagnostics``).
    """

    def __init__(self, node, status, publish_diagnostics) -> None:
        s = node.settings
        self.node, self._status, self._publish = node, status, publish_diagnostics
        self.labels = [str(label) for label in s.contacts_labels]
        self.min_force, self.warn_below, self.stale_after = s.contacts_min_force, s.contacts_agreement_warn, \
            s.stale_after
        self.agreement = ContactAgreement(window=s.contacts_agreement_window, reference='real', other='sim')
        self.slip = {side: SlipWatch(s.contacts_slip_threshold, s.contacts_slip_hold, s.contacts_slip_release)
                     for side in SOURCES}
        #: {(side, label): (arrival monotonic s, in contact, slip m/s or NaN before one came)}.
        self.latest: dict[tuple[str, str], list] = {}
        for side, prefix in (('real', s.contacts_real_prefix), ('sim', s.contacts_sim_prefix)):
            for label in self.labels:
                base = f'{prefix.rstrip("/")}/{label}'
                guarded_subscription(node, WrenchStamped, f'{base}/wrench',
                                     lambda m, side=side, label=label: self._on_wrench(side, label, m), 10)
                guarded_subscription(node, TwistStamped, f'{base}/slip',
                                     lambda m, side=side, label=label: self._on_slip(side, label, m), 10)
        node.get_logger().info(f'contacts: {", ".join(self.labels)}: {s.contacts_sim_prefix} vs '
                               f'{s.contacts_real_prefix}; slip over {s.contacts_slip_threshold:g} m/s for '
                               f'{s.contacts_slip_hold:g} s warns')

    def _on_wrench(self, side: str, label: str, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        force = math.sqrt(f.x * f.x + f.y * f.y + f.z * f.z)
        if not math.isfinite(force):
            return                                    # a NaN wrench says nothing about contact
        in_contact = force > self.min_force
        self.agreement.add(side, label, to_seconds(msg.header.stamp), in_contact)
        latest = self.latest.setdefault((side, label), [0.0, False, math.nan])
        latest[0], latest[1] = time.monotonic(), in_contact

    def _on_slip(self, side: str, label: str, msg: TwistStamped) -> None:
        latest = self.latest.get((side, label))
        in_contact = bool(latest and latest[1])
        speed = float(msg.twist.linear.x)
        event = self.slip[side].update(label, to_seconds(msg.header.stamp), speed, in_contact)
        if latest is not None:
            latest[2] = speed
        if event is None:
            return
        log = self.node.get_logger()
        if event.slipping:
            log.warning(f'{side} {label}: slipping since {event.since:.3f} s (peak {event.peak:.3f} m/s)')
        else:
            log.info(f'{side} {label}: no longer slipping (peak {event.peak:.3f} m/s)')
        array = DiagnosticArray(status=self.statuses())
        array.header.stamp = msg.header.stamp             # known at this sample
        self._publish(array)

    def statuses(self, now: float | None = None) -> list[DiagnosticStatus]:
        """One status per label (module doc)."""
        now = time.monotonic() if now is None else now
        out = []
        for label in self.labels:
            real, sim = self.latest.get(('real', label)), self.latest.get(('sim', label))
            agreement = self.agreement.agreement(label)
            slipping = [side for side in SOURCES if label in self.slip[side].slipping()]
            stale = [side for side, last in (('real', real), ('sim', sim)) if last is None or
                     now - last[0] > self.stale_after]
            low = agreement.matched >= MIN_MATCHED and agreement.fraction < self.warn_below
            level = STALE if stale else WARN if slipping or low else OK
            message = (f'no contact output from {" and ".join(stale)} for {self.stale_after:g} s' if stale else
                       f'slipping ({", ".join(slipping)})' if slipping else
                       f'sim and real agree on {agreement.fraction:.0%} of samples' if low else
                       f'in contact: real {real[1]}, sim {sim[1]}')
            values = {'agreement': 'nan' if np.isnan(agreement.fraction) else f'{agreement.fraction:.3f}',
                      'matched': str(agreement.matched), 'unmatched': str(agreement.unmatched),
                      'real_in_contact': str(bool(real and real[1])).lower(),
                      'sim_in_contact': str(bool(sim and sim[1])).lower(),
                      'real_slip': f'{real[2]:.4f}' if real else 'nan', 'sim_slip': f'{sim[2]:.4f}' if sim else 'nan',
                      'slipping': ','.join(slipping)}
            out.append(self._status(level, STATUS_PREFIX + label, message, values))
        return out

