"""Reload without blocking (issue 9), without ROS: the background build with a deadline
(``shadow_twin.simulation.reload``), the size limit checked before parsing, the byte scan
for includes, and ``LiveSimulation.prepare_reload`` / ``apply_reload``."""

from __future__ import annotations

import os
import threading
import time

import pytest

from shadow_twin.common.errors import ModelError, ModelTooLarge
from shadow_twin.model import mjcf
from shadow_twin.model.mjcf import TwinModel, builtin_model_path
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.reload import BackgroundBuild, BuildBusy, BuildCancelled, BuildTimeout


def sleeper(seconds: float, result='built', started: threading.Event | None = None):
    def build():
        if started is not None:
            started.set()
        time.sleep(seconds)
        return result
    return build


def test_background_build_returns_the_result_or_raises_its_error():
    builds = BackgroundBuild()
    assert builds.run(sleeper(0.01), timeout=5.0) == 'built'

    def broken():
        raise ModelError('does not compile')
    with pytest.raises(ModelError, match='does not compile'):
        builds.run(broken, timeout=5.0)
    assert not builds.running
    if hasattr(os, 'getpriority'):          # the build yields the CPU to the physics loop
        main = os.getpriority(os.PRIO_PROCESS, 0)
        assert builds.run(lambda: os.getpriority(os.PRIO_PROCESS, 0), timeout=5.0) > main


def test_background_build_times_out_refuses_while_busy_and_discards_the_late_result():
    late = []
    ended = threading.Event()
    builds = BackgroundBuild('test_build', on_late=lambda *args: (late.append(args), ended.set()))
    start = time.monotonic()
    with pytest.raises(BuildTimeout, match='compiling x.xml took longer than 0.1 s'):
        builds.run(sleeper(0.6, result='late model'), timeout=0.1, label='compiling x.xml')
    assert time.monotonic() - start < 0.3
    assert builds.running
    thread = next(t for t in threading.enumerate() if t.name == 'test_build')
    assert thread.daemon                    # process exit never waits for it
    start = time.monotonic()
    with pytest.raises(BuildBusy, match='compiling x.xml is still running'):
        builds.run(sleeper(0.0), timeout=5.0)
    assert time.monotonic() - start < 0.05   # at once, nothing started
    assert ended.wait(5.0)
    [(label, seconds, error)] = late
    assert label == 'compiling x.xml' and seconds >= 0.6 and error is None
    assert builds.run(sleeper(0.0, result='next'), timeout=5.0) == 'next'     # the late result never shows


def test_background_build_stops_waiting_when_cancelled():
    builds = BackgroundBuild()
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(BuildCancelled, match='shutting down'):
        builds.run(sleeper(1.0), timeout=30.0, cancel=cancel)
    assert time.monotonic() - start < 0.25


def with_include(tmp_path, include_text: str):
    """A copy of the built-in hand that includes ``extra.xml`` holding ``include_text``."""
    text = builtin_model_path().read_text()
    at = text.rindex('</mujoco>')
    root = tmp_path / 'hand.xml'
    root.write_text(text[:at] + '<include file="extra.xml"/>\n' + text[at:])
    (tmp_path / 'extra.xml').write_text(include_text)
    return root


def test_size_limit_counts_the_includes_and_is_checked_before_parsing(tmp_path):
    root = with_include(tmp_path, '<mujoco><worldbody><!--' + 'x' * 200_000 + '-->'
                                  '<site name="pad"/></worldbody></mujoco>')
    own = root.stat().st_size
    assert TwinModel(root, max_bytes=own + 300_000).joint_names        # under the limit: loads
    with pytest.raises(ModelTooLarge, match=f'above the limit of {own + 1000} bytes') as info:
        TwinModel(root, max_bytes=own + 1000)
    assert str(root) in str(info.value)
    root.write_text(root.read_text().replace('<mujoco', '<mujoco broken="', 1))   # would not parse
    with pytest.raises(ModelTooLarge):          # refused before MuJoCo sees it
        TwinModel(root, max_bytes=own - 1)
    sim = LiveSimulation()
    model = sim.model
    with pytest.raises(ModelTooLarge):
        sim.prepare_reload(root, max_bytes=1024)
    assert sim.model is model


def test_includes_are_found_by_a_byte_scan(monkeypatch):
    data = (b'<mujoco><!-- <include file="commented.xml"/> -->\n<include  file = \'a.xml\' />'
            b'<includes file="not.xml"/><include\n name="n" file="b.xml"></include><!-- open')
    assert mjcf._include_names(data) == ['a.xml', 'b.xml']
    monkeypatch.setattr(mjcf, '_SCAN_WINDOW', 3)         # tokens across window edges are found
    assert mjcf._include_names(data) == ['a.xml', 'b.xml']


def test_prepare_reload_changes_nothing_until_apply(tmp_path):
    sim = LiveSimulation()
    model, overrides = sim.model, sim.overrides
    prepared = sim.prepare_reload(overrides={'rh_FFJ1': {'damping': 1.0}})
    assert sim.model is model and sim.overrides is overrides
    report = sim.apply_reload(prepared)
    assert sim.model is prepared.twin.model and sim.overrides is prepared.overrides
    assert len(report.kept_state) == len(sim.joint_names)
