"""Section ``bridge`` of the view benchmark (issue 38: "the bridge's RTF and jitter p99 at 250 Hz with TF,
markers and a browser client connected, against none of them, in one run: RTF >= 0.99, p99 < 2 ms").

Each start is ``benchmarks/bridge.py``'s measurement (the bridge a process of its own on a private ROS domain,
the real-time factor from its ``/diagnostics``, the period jitter of ``/sim/joint_states`` as a lean subscriber
process receives it, the bridge's CPU; a few goals), with the hand's mock hardware and the twin monitor running
beside it as in a lab (the monitor compares the two), under these conditions:

* **none**: the bridge's view outputs off (``tf_rate`` 0, no ``markers_topic``), the monitor's too
  (``view.enabled`` false), no browser view;
* **all**: the bridge's defaults (every body on ``/tf`` at 30 Hz, the markers, the contact arrows' topic), the
  monitor's real tree and ghost (its defaults), and ``shadow-twin view`` with a client connected that draws
  nothing here: a websocket connection reading every message the view sends, as a browser's on a laptop
  (``view_browser.remote_client``: the view's whole work for a client, the drawing on the client's machine);
* **all, drawn here** (once, at the end; printed, not judged): the same with headless Chromium drawing the page
  on this PC (``view_browser.browser_client``): software WebGL on the same two cores, which takes more than one
  of them (the bridge benchmark's reference process, a plain sleep loop, then wakes tens of ms late: the
  machine's stall, whatever the bridge does).

none and all alternate (none, all, all, none: a drift of the machine's speed falls on both alike), ``--view-runs``
pairs; each start is printed, then the medians of each condition and their ratio (all over none).

Before them, in this process and free of the other processes' noise, **the tick's cost**: the cell's bridge tick
(``LiveSimulation.step(2)``, a 4 ms tick at 250 Hz) alone and followed by the view's output
(``mujoco_bridge.visual_output.VisualOutput.tick``: due every 33 ms of the ticks' schedule, the bodies' poses
copied, their transforms computed and published on a real ``/tf`` publisher), timed tick by tick in alternating
blocks (A B B A) from one saved state; printed: the mean tick cost of each (the mean carries the 30 Hz work
spread over the ticks) and their ratio, and the cost of a tick that publishes.

Usage: ``.venv/bin/python benchmarks/view.py --sections bridge [--view-seconds 10] [--view-runs 1]``.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import numpy as np

import bridge
from support import ros as ros_helpers

RATE = 250.0
#: Goals per start (the goal latency is printed, not this section's target).
TRIALS = 5
OFF = (['-p', 'tf_rate:=0.0', '-p', "markers_topic:=''", '-p', "contact_markers_topic:=''"], ['-p', 'view.enabled:=false'])
#: condition: (the bridge's extra parameters, the monitor's, the client: None, 'remote' or 'drawn').
CONDITIONS = {'none': (*OFF, None), 'all': ([], [], 'remote'), 'all, drawn here': ([], [], 'drawn')}


def add_arguments(parser) -> None:
    parser.add_argument('--view-seconds', type=float, default=10.0, help='steady window of each bridge start, s')
    parser.add_argument('--view-runs', type=int, default=1, help='pairs of (none, all) starts, alternating')


@contextlib.contextmanager
def beside(folder: Path, monitor_args: list[str], client: str | None):
    """The hand's mock hardware and the twin monitor (and the view with its ``client``, module doc) running while
    the block runs; yields a line naming the client."""
    import view_browser
    procs = [ros_helpers.NodeProcess('mujoco_bridge.main', ['--params-file', 'config/mock_hardware.yaml',
                                                            '-r', '__node:=mock_hardware'], folder / 'mock.log'),
             ros_helpers.NodeProcess('shadow_twin.ros.monitor.node', ['--params-file', 'config/twin_monitor.yaml',
                                                                      *monitor_args], folder / 'monitor.log')]
    try:
        if client == 'remote':
            with view_browser.remote_client(folder) as received:
                yield received
        elif client == 'drawn':
            with view_browser.browser_client(folder) as note:
                yield note
        else:
            yield 'no view'
    finally:
        for proc in procs:
            proc.stop()


def tick_cost(blocks: int = 20, ticks: int = 250) -> None:
    """The in-process tick cost (module doc), printed."""
    import time
    from types import SimpleNamespace
    import mujoco
    import rclpy
    from mujoco_bridge.visual_output import VisualOutput
    from shadow_twin.common.paths import config_path
    from shadow_twin.model.cell.assembly import write_cell_mjcf
    from shadow_twin.ros.conversions import time_msg
    from shadow_twin.simulation.live.simulation import LiveSimulation
    folder = Path(tempfile.mkdtemp(prefix='view_tick_'))
    path, _ = write_cell_mjcf(None, folder / 'cell.xml')
    sim = LiveSimulation(path, gains=config_path('controllers', 'cell.yaml'))
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node('view_tick_cost', context=context)
    settings = SimpleNamespace(tf_prefix='sim/', mesh_dir=str(folder), tf_rate=30.0, tf_world_frame='world',
                               markers_topic='')
    output = VisualOutput(node, sim, settings, time_msg)
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(sim.model, spec))
    mujoco.mj_getState(sim.model, sim.data, state, spec)
    times: dict[str, list[float]] = {'without': [], 'with': []}
    publishing: list[float] = []
    clock, mono = time.perf_counter, 0.0
    for block in range(2 * blocks):
        condition = ('without', 'with', 'with', 'without')[block % 4]
        with sim.lock:
            mujoco.mj_setState(sim.model, sim.data, state, spec)
        for _ in range(ticks):
            mono += 1.0 / RATE
            t0 = clock()
            sim.step(2)
            if condition == 'with':
                due = mono >= output._next_due
                output.tick(mono)
            t1 = clock()
            times[condition].append(t1 - t0)
            if condition == 'with' and due:
                publishing.append(t1 - t0)
    node.destroy_node()
    rclpy.shutdown(context=context)
    without, with_ = float(np.mean(times['without'])), float(np.mean(times['with']))
    print(f'  tick cost (the cell, in this process, {blocks} blocks of {ticks} ticks each way): mean without '
          f'{without * 1e6:.0f} us, with the TF output {with_ * 1e6:.0f} us (ratio {with_ / without:.3f}); a tick '
          f'that publishes: median {np.median(publishing) * 1e6:.0f} us ({len(publishing)} ticks), '
          f'p99 without {np.percentile(times["without"], 99) * 1e6:.0f} us, with {np.percentile(times["with"], 99) * 1e6:.0f} us',
          flush=True)


class SimDiagnostics(ros_helpers.Recorder):
    """Records the ``/diagnostics`` messages of the sim bridge (those with its ``mujoco_bridge: physics``)."""

    def __call__(self, msg) -> None:
        if any(status.name == 'mujoco_bridge: physics' for status in msg.status):
            super().__call__(msg)


def run(check, args) -> None:
    """The bridge section (module doc)."""
    tick_cost()
    domain = ros_helpers.isolate_domain()
    ros_client = ros_helpers.RosClient('view_benchmark', domain_id=domain)
    log_dir = Path(tempfile.mkdtemp(prefix='view_benchmark_'))
    print(f'== bridge: RTF and jitter at {RATE:g} Hz, the view\'s outputs off and on, {args.view_runs} pair(s), '
          f'ROS domain {domain}; logs in {log_dir}', flush=True)
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    states = ros_client.record(JointState, '/sim/joint_states', depth=1000)
    diagnostics = SimDiagnostics()          # the monitor and the mock hardware publish /diagnostics too
    ros_client.node.create_subscription(DiagnosticArray, '/diagnostics', diagnostics, 100)
    results: dict[str, list[dict]] = {name: [] for name in CONDITIONS}
    pairs = max(1, args.view_runs)
    order = [c for k in range(pairs) for c in (('none', 'all') if k % 2 == 0 else ('all', 'none'))] + ['all, drawn here']
    try:
        for k, condition in enumerate(order):
            bridge_args, monitor_args, client_kind = CONDITIONS[condition]
            folder = log_dir / f'{k}_{condition.replace(", ", "_").replace(" ", "_")}'
            folder.mkdir()
            with beside(folder, monitor_args, client_kind) as client:
                r = bridge.run(RATE, args.view_seconds, TRIALS, ros_client, log_dir, f'_{k}', states, diagnostics,
                               bridge_args)
                note = (f'a connected client read {client["messages"]} messages, {client["bytes"] / 1e6:.1f} MB'
                        if isinstance(client, dict) else client)
            results[condition].append(r)
            bridge.print_run(RATE, r, f', view outputs: {condition} ({note})')
            print(flush=True)
    finally:
        ros_client.close()
    medians = {c: {key: float(np.median([r[key] if key != 'jitter' else r['jitter_ms'][99] for r in rs]))
                   for key in ('rtf', 'jitter', 'cpu_share')} for c, rs in results.items()}
    none, all_ = medians['none'], medians['all']
    print(f'  medians: none RTF {none["rtf"]:.4f}, jitter p99 {none["jitter"]:.3f} ms, bridge CPU '
          f'{100 * none["cpu_share"]:.1f} %; all RTF {all_["rtf"]:.4f}, jitter p99 {all_["jitter"]:.3f} ms, bridge '
          f'CPU {100 * all_["cpu_share"]:.1f} %; all / none: RTF {all_["rtf"] / none["rtf"]:.4f}, bridge CPU '
          f'{all_["cpu_share"] / none["cpu_share"]:.2f}')
    for r in results['all, drawn here']:
        print(f'  all, drawn here: RTF {r["rtf"]:.4f}, jitter p99 {r["jitter_ms"][99]:.3f} ms, the bridge\'s own longest '
              f'stall {r["own_stall_ms"]:.1f} ms, a sleeping reference process woke up to {r["machine_stall_ms"]:.0f} ms '
              f'late ({r["machine_stalls_over"]} times > 20 ms) (not judged: module doc)')
    for condition in ('none', 'all'):
        for r in results[condition]:
            check(r['rtf'] >= bridge.RTF_MIN and r['jitter_ms'][99] < bridge.JITTER_P99_MAX_MS,
                  f'  {condition}: RTF {r["rtf"]:.4f} (target >= {bridge.RTF_MIN}), jitter p99 '
                  f'{r["jitter_ms"][99]:.3f} ms (target < {bridge.JITTER_P99_MAX_MS:g} ms)')
