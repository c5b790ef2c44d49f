"""``shadow-twin up`` judges its nodes by their ready lines, and a hostile file read at start stops
nothing (issue 33 items 7 and 8).

``up --mock-hardware`` starts with a drift state file of 200,000 ``[`` where the twin monitor
keeps it (``$ROS_HOME/shadow_twin/drift/twin_monitor.json``; the adversary's file made the monitor
raise RecursionError and ``up`` stopped every node). Every node must get ready (``up`` reports
``ready: ...``), the monitor must log one line naming the file, and the file must be kept aside.
Then the mock hardware, ready, is SIGKILLed: ``up`` respawns it, the others run on, and its new
process gets ready again; ``up`` then stops with exit status 0, saying how long each node took to
stop.
"""

from __future__ import annotations

import os
import re
import signal

from support import cell as cell_helpers

#: s for up's nodes to get ready, and for a respawned one (two busy processes beside the test slow
#: the start 2-3 fold).
START_TIMEOUT = 120.0


def test_up_starts_past_a_hostile_drift_file_and_respawns_a_node_killed_once_ready(ros, tmp_path, monkeypatch):
    helpers, _ = ros
    home = tmp_path / 'ros_home'
    state = home / 'shadow_twin' / 'drift' / 'twin_monitor.json'
    state.parent.mkdir(parents=True)
    hostile = '[' * 200_000
    state.write_text(hostile)
    monkeypatch.setenv('ROS_HOME', str(home))       # the monitor's default state file: this one
    up = cell_helpers.up(tmp_path / 'up.log', '--mock-hardware')
    try:
        ready = helpers.wait_until(lambda: '[shadow-twin up] ready: ' in up.output() or not up.alive(), START_TIMEOUT)
        out = up.output()
        assert ready and up.alive(), out[-4000:]
        named = [line for line in out.splitlines() if str(state) in line]
        assert len(named) == 1 and 'nested too deeply' in named[0] and 'moved aside to' in named[0], named
        aside = list(state.parent.glob('twin_monitor.json.corrupt-*'))
        assert len(aside) == 1 and aside[0].read_text() == hostile
        assert all(f'{node} after' in out for node in ('mujoco_bridge', 'mock_hardware', 'shadow_twin',
                                                        'twin_monitor')), out[-4000:]

        pid = int(re.search(r'mock_hardware \(pid (\d+)\)', out).group(1))
        os.kill(pid, signal.SIGKILL)
        assert helpers.wait_until(lambda: 'mock_hardware is ready again' in up.output() or not up.alive(),
                                  START_TIMEOUT), up.output()[-4000:]
        out = up.output()
        assert up.alive() and 'mock_hardware exited with status -9; the other nodes run on' in out, out[-4000:]
        assert 'stopped the others' not in out and 'cannot start' not in out
    finally:
        status = up.stop(timeout=20.0)
    assert status == 0, up.output()[-4000:]
    assert aside[0].read_text() == hostile            # the monitor's save at its stop wrote a new file
    # up says how long each node took to stop, the twin first (it cancels its goals while the bridges run)
    stops = re.findall(r'\[shadow-twin up\] (\w+) stopped ([\d.]+) s after SIGINT \(status 0\)', up.output())
    assert [name for name, _ in stops][:2] == ['shadow_twin', 'twin_monitor'], up.output()[-2000:]
    assert sorted(name for name, _ in stops) == sorted(['mujoco_bridge', 'mock_hardware', 'shadow_twin', 'twin_monitor'])
