"""Section ``browser`` of the view benchmark (``benchmarks/view.py``): the browser view's latency, from a
joint state's stamp to the page. Target: p50 <= 100 ms from the stamp to the page's receipt of the update;
the time to the drawn frame after it is printed beside it (no target: it is the browser's drawing, here
software WebGL on the same CPU; a laptop's GPU draws the hand in a few ms).

**Set-up** (all on this PC, a private ROS domain): ``shadow-twin view`` in its own process; this process
publishes what the sim bridge and the twin monitor publish for it (``test/support/view_twin.py``: the
built-in Shadow Hand E's bodies on ``/tf``, sim and real, at ``--browser-rate`` Hz, every joint moving, the
markers, the joint errors at the same rate, a diagnostic status a second); headless Chromium (the
distribution's, software WebGL) shows the page, driven over the DevTools protocol.

**What is measured**: each sim ``/tf`` message also carries a probe frame (``sim/world`` -> ``sim/probe``,
moved 1 um per message: invisible, the message's sequence number); its stamp is the publisher's system
clock when it publishes, as the bridge stamps a sim state. A script in the page (run before viser's own)
notes the time when viser's websocket worker hands the page's main thread a batch that carries the probe's
new position (*received*), and the time each frame's WebGL drawing ends (the microtask after the task that
issued its first draw call: the whole render has returned); *drawn* is the end of the first frame begun
after the probe was received (viser applies the waiting messages at the start of a frame, then draws it).
Both times are the page's ``performance.timeOrigin + performance.now()``: the same system clock as the
stamps. Latency = time - stamp, over ``--browser-seconds`` s once the page shows the probe; a probe never
received is not counted (viser sends a frame only its newest pose waiting: a skipped pose is not a late one).

Also printed: the CPU the view's process and Chromium's used meanwhile (% of one core).

Usage: ``.venv/bin/python benchmarks/view.py --sections browser`` (about 40 s), or this file alone.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'benchmarks'))

from checks import Checks  # noqa: E402  (after the path set-up)
from support import ros  # noqa: E402
from support.browser import HIDE_NOTIFICATIONS, HeadlessChromium, find_chromium  # noqa: E402
from support.view_twin import PROBE_FRAME, PROBE_STEP, TwinPublisher  # noqa: E402

from shadow_twin.visual.browser_frames import node_name  # noqa: E402

#: Target: the median latency from a stamp to the page's receipt, ms.
TARGET_P50_MS = 100.0
READY = re.compile(r'ready: serving (http://\S+/)')
#: The page's hook (module doc): wraps ``Worker`` so that every worker viser makes reports the probe's
#: positions to it, and WebGL's draw calls so that each frame drawn is noted (its first draw call, and the end
#: of the task that drew it: a microtask runs once the frame's render has returned).
HOOK = '''
(() => {
  const Native = window.Worker, probe = "/%s", now = () => performance.timeOrigin + performance.now();
  window.__probe = [];
  window.__frames = [];
  let frameStart = null;
  for (const proto of [WebGLRenderingContext.prototype, WebGL2RenderingContext.prototype]) {
    for (const name of ["drawElements", "drawArrays", "drawElementsInstanced", "drawArraysInstanced"]) {
      const draw = proto[name];
      if (!draw) continue;
      proto[name] = function (...args) {
        if (frameStart === null) {
          frameStart = now();
          queueMicrotask(() => { window.__frames.push([frameStart, now()]); frameStart = null; });
        }
        return draw.apply(this, args);
      };
    }
  }
  window.Worker = function (url, options) {
    const worker = new Native(url, options);
    worker.addEventListener("message", (event) => {
      const data = event.data;
      if (!data || data.type !== "message_batch") return;
      for (const m of data.messages) {
        if (m.type === "SetPositionMessage" && m.name.endsWith(probe)) {
          window.__probe.push({x: m.position[0], received: now()});
        }
      }
    });
    return worker;
  };
  window.Worker.prototype = Native.prototype;
})();
''' % node_name(PROBE_FRAME)
#: The probes and frames noted so far, taken out of the page's lists.
TAKE = ('(() => { const out = {probes: window.__probe, frames: window.__frames}; '
        'window.__probe = []; window.__frames = []; return out; })()')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--browser-seconds`` (measured time) and ``--browser-rate`` (Hz of /tf and the joint errors)."""
    parser.add_argument('--browser-seconds', type=float, default=20.0, help='browser: seconds measured (20)')
    parser.add_argument('--browser-rate', type=float, default=30.0, help='browser: Hz of /tf, as the bridge (30)')
    parser.add_argument('--browser-size', type=int, nargs=2, default=(1200, 800), metavar=('W', 'H'),
                        help='browser: the page\'s size in px (1200 800)')


def percentiles(values_ms: list[float]) -> str:
    a = np.array(values_ms)
    return f'p50 {np.percentile(a, 50):.0f} ms, p90 {np.percentile(a, 90):.0f} ms, max {a.max():.0f} ms'


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for p in processes:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def measure(args, log_dir: Path) -> dict:
    """One run (module doc): {'received': [ms], 'drawn': [ms], 'sent': n, 'view_cpu': %, 'chromium_cpu': %}."""
    domain = ros.isolate_domain()
    view = ros.NodeProcess(None, [], log_dir / 'view.log', command=[
        ros.PYTHON, '-m', 'shadow_twin.cli.main', 'view', '--port', '0', '--domain-id', str(domain)])
    client = publisher = chromium = None
    try:
        if not ros.wait_until(lambda: READY.search(view.output()) or not view.alive(), 60.0, 0.1):
            raise RuntimeError(f'the view did not start: {view.output()[-500:]}')
        url = READY.search(view.output()).group(1)
        client = ros.RosClient('view_benchmark')
        publisher = TwinPublisher(client.node, log_dir / 'meshes', rate=args.browser_rate, motion=0.3, probe=True)
        chromium = HeadlessChromium(log_dir / 'chromium.log', *args.browser_size, init_script=HOOK)
        chromium.open(url)
        chromium.evaluate(HIDE_NOTIFICATIONS)
        if not ros.wait_until(lambda: chromium.evaluate('window.__probe.length > 0 && window.__frames.length > 0'),
                              90.0, 0.2):
            raise RuntimeError('the page never received the probe')
        chromium.evaluate(TAKE)
        view_process, browser = psutil.Process(view.pid), chromium.processes()
        cpu_before = cpu_seconds([view_process]), cpu_seconds(browser)
        first = max(publisher.sent)
        started = time.monotonic()
        probes, frames = [], []
        while time.monotonic() - started < args.browser_seconds:
            time.sleep(1.0)
            taken = chromium.evaluate(TAKE)
            probes += taken['probes']
            frames += taken['frames']
        wall = time.monotonic() - started
        cpu_after = cpu_seconds([view_process]), cpu_seconds(browser)
        last = max(publisher.sent)
        time.sleep(1.0)                               # the frames that draw the last probes
        taken = chromium.evaluate(TAKE)
        probes += taken['probes']
        frames += taken['frames']
    finally:
        if chromium is not None:
            chromium.close()
        if publisher is not None:
            publisher.close()
        if client is not None:
            client.close()
        view.stop()
    starts = np.array([f[0] for f in frames])
    ends = np.array([f[1] for f in frames])
    received, drawn, seen = [], [], set()
    for e in probes:
        sequence = int(round(e['x'] / PROBE_STEP))
        if sequence <= first or sequence > last or sequence in seen:
            continue
        seen.add(sequence)
        stamp = 1e3 * publisher.sent[sequence]
        later = np.nonzero(starts >= e['received'])[0]
        if len(later) == 0:
            continue
        received.append(e['received'] - stamp)
        drawn.append(float(ends[later[0]]) - stamp)
    return {'received': received, 'drawn': drawn, 'sent': last - first, 'frame_ms': ends - starts,
            'frame_interval_ms': np.diff(starts),
            'view_cpu': 100 * (cpu_after[0] - cpu_before[0]) / wall,
            'chromium_cpu': 100 * (cpu_after[1] - cpu_before[1]) / wall}


@contextlib.contextmanager
def browser_client(log_dir: Path, size: tuple[int, int] = (1200, 800)):
    """``shadow-twin view`` on this process's ROS domain with headless Chromium showing its page, while the block
    runs (the bridge section's "browser client connected"); yields a line saying so. Raises RuntimeError: the
    view did not start; no Chromium."""
    if find_chromium() is None:
        raise RuntimeError('chromium is not installed (bash scripts/setup.sh installs it)')
    view = ros.NodeProcess(None, [], log_dir / 'view.log', command=[ros.PYTHON, '-m', 'shadow_twin.cli.main', 'view',
                                                                  '--port', '0'])
    chromium = None
    try:
        if not ros.wait_until(lambda: READY.search(view.output()) or not view.alive(), 60.0, 0.1):
            raise RuntimeError(f'the view did not start: {view.output()[-500:]}')
        chromium = HeadlessChromium(log_dir / 'chromium.log', *size)
        chromium.open(READY.search(view.output()).group(1))
        yield f'shadow-twin view with headless Chromium ({size[0]}x{size[1]})'
    finally:
        if chromium is not None:
            chromium.close()
        view.stop()


@contextlib.contextmanager
def remote_client(log_dir: Path):
    """``shadow-twin view`` on this process's ROS domain with one client connected that draws nothing: a websocket
    connection as a browser's on another machine (a laptop) makes it, reading every message the view sends, while
    the block runs; yields a dict that holds, at the end, the messages and bytes it received. Raises RuntimeError:
    the view did not start."""
    import asyncio
    import threading
    import viser
    import websockets
    view = ros.NodeProcess(None, [], log_dir / 'view.log', command=[ros.PYTHON, '-m', 'shadow_twin.cli.main', 'view',
                                                                  '--port', '0'])
    received = {'messages': 0, 'bytes': 0}
    stop = threading.Event()

    async def read(url: str) -> None:
        async with websockets.connect(url, max_size=None, subprotocols=[f'viser-v{viser.__version__}']) as socket:
            while not stop.is_set():
                try:
                    message = await asyncio.wait_for(socket.recv(), 0.2)
                except asyncio.TimeoutError:
                    continue
                received['messages'] += 1
                received['bytes'] += len(message)
    thread = None
    try:
        if not ros.wait_until(lambda: READY.search(view.output()) or not view.alive(), 60.0, 0.1):
            raise RuntimeError(f'the view did not start: {view.output()[-500:]}')
        url = READY.search(view.output()).group(1).replace('http://', 'ws://')
        thread = threading.Thread(target=lambda: asyncio.run(read(url)), daemon=True)
        thread.start()
        yield received
    finally:
        stop.set()
        if thread is not None:
            thread.join(5.0)
        view.stop()


def run(check, args) -> None:
    """The browser section (module doc): prints the latencies; checks the median to the page's receipt."""
    width, height = args.browser_size
    print(f'== browser: the view\'s latency from a /tf stamp to the page (headless Chromium {width}x{height}, software '
          f'WebGL; the hand\'s sim and real trees at {args.browser_rate:g} Hz, {args.browser_seconds:g} s)', flush=True)
    if find_chromium() is None:
        check(False, '  chromium is not installed (bash scripts/setup.sh installs it)')
        return
    with tempfile.TemporaryDirectory(prefix='view_browser_') as folder:
        result = measure(args, Path(folder))
    drawn, received = result['drawn'], result['received']
    if not drawn:
        check(False, '  no probe was drawn')
        return
    print(f'  {len(drawn)} of {result["sent"]} probe poses received and drawn (the others: a newer pose of the frame '
          f'was sent instead)', flush=True)
    print(f'  CPU: the view {result["view_cpu"]:.0f} %, Chromium {result["chromium_cpu"]:.0f} % of a core; the page drew '
          f'a frame every {np.median(result["frame_interval_ms"]):.0f} ms (median), its draw calls '
          f'{np.median(result["frame_ms"]):.0f} ms', flush=True)
    print(f'  stamp -> drawn by the page (the frame after it, software WebGL): {percentiles(drawn)}', flush=True)
    check(float(np.percentile(received, 50)) <= TARGET_P50_MS,
          f'  stamp -> received by the page: {percentiles(received)} (target p50 <= {TARGET_P50_MS:.0f} ms)')


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    checks = Checks()
    run(checks, parser.parse_args())
    sys.exit(1 if checks.failed else 0)
