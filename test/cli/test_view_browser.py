"""``shadow-twin view`` in a real browser: the view in its own process on this run's private ROS domain, the
contract's messages (TF, markers, joint errors, diagnostics; ``support/view_twin.py``, the built-in hand)
published from this process, and the page loaded by headless Chromium from the distribution's package
(software WebGL; no browser download) over the DevTools protocol.

Checked on screenshots, each polled until the page shows it (a loaded 2-core PC draws a frame in seconds):
the cell's spot is background before the robot is published and holds the robot's pixels after; the real
robots' ghost is green on the sim while both agree, and once the real wrist lags the sim by 0.4 rad (every
finger link then 20 mm or more from the sim's: the colour scale's red) red pixels appear and the fingers'
green goes (the forearm's stays);
a malformed transform in between leaves the view drawing. The page's Pause button calls the bridge's
``~/pause`` service (served here) and then reads Resume. Every process ends with the test: the view exits 0
on SIGINT, Chromium and its helpers are gone.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import psutil
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]   # rclpy and DDS; a browser (setup.cfg)

pytest.importorskip('rclpy')
from std_srvs.srv import SetBool  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from shadow_twin.ros.visual_msgs import TF_QOS, identity_transform  # noqa: E402
from support import ros  # noqa: E402
from support.browser import HIDE_NOTIFICATIONS, HeadlessChromium, find_chromium  # noqa: E402
from support.view_twin import TwinPublisher  # noqa: E402

#: The page's size, px (the panel takes its right 320 px).
WIDTH, HEIGHT = 1000, 700
#: Where the robot stands on the page: the camera aims at the drawn robot's centre, the canvas's middle.
ROBOT = (slice(int(0.12 * HEIGHT), int(0.88 * HEIGHT)), slice(int(0.2 * WIDTH), int(0.62 * WIDTH)))
#: s the page may take to show a change (software WebGL on a loaded PC).
DRAW_TIMEOUT = 90.0
READY = re.compile(r'ready: serving (http://\S+/)')


def dark(image: np.ndarray) -> int:
    """Pixels of the robot's spot darker than the grid's lines (the hand is dark grey; the page is white)."""
    return int((image[ROBOT].astype(int).mean(axis=2) < 110).sum())


def reddish(image: np.ndarray) -> int:
    rgb = image[ROBOT].astype(int)
    return int(((rgb[..., 0] - rgb[..., 1] > 50) & (rgb[..., 0] - rgb[..., 2] > 50)).sum())


def greenish(image: np.ndarray) -> int:
    rgb = image[ROBOT].astype(int)
    return int(((rgb[..., 1] - rgb[..., 0] > 25) & (rgb[..., 1] - rgb[..., 2] > 15)).sum())


@pytest.fixture(scope='module')
def domain():
    if find_chromium() is None:
        pytest.skip('chromium is not installed (bash scripts/setup.sh installs the distribution\'s package)')
    return ros.isolate_domain()


@pytest.fixture()
def view(domain, tmp_path):
    process = ros.NodeProcess(None, [], tmp_path / 'view.log', command=[
        ros.PYTHON, '-m', 'shadow_twin.cli.main', 'view', '--port', '0', '--domain-id', str(domain)])
    try:
        assert ros.wait_until(lambda: READY.search(process.output()) or not process.alive(), 60.0, 0.1)
        found = READY.search(process.output())
        assert found, process.output()
        yield process, found.group(1)
    finally:
        status = process.stop()
        assert status == 0, process.output()


@pytest.fixture()
def browser(tmp_path):
    chromium = HeadlessChromium(tmp_path / 'chromium.log', WIDTH, HEIGHT)
    try:
        yield chromium
    finally:
        family = chromium.processes()
        chromium.close()
        assert not [p.pid for p in family if running(p)]


def running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def shows(browser: HeadlessChromium, condition, timeout: float = DRAW_TIMEOUT) -> np.ndarray:
    """The first screenshot for which ``condition(image)`` holds, polled (AssertionError after ``timeout``)."""
    seen = []

    def check() -> bool:
        seen[:] = [browser.screenshot()]
        return bool(condition(seen[0]))
    assert ros.wait_until(check, timeout, interval=0.2), \
        f'the page never showed it (dark {dark(seen[0])}, red {reddish(seen[0])}, green {greenish(seen[0])})'
    return seen[0]


def test_the_page_draws_the_robot_and_the_ghosts_error_colours(view, browser, tmp_path):
    process, url = view
    browser.open(url)
    browser.evaluate(HIDE_NOTIFICATIONS)
    empty = shows(browser, lambda image: browser.evaluate(
        '[...document.querySelectorAll("button")].some(b => b.textContent.trim() === "Pause")'), 60.0)
    assert dark(empty) < 200 and reddish(empty) < 50          # the spot is background: nothing published yet
    client = ros.RosClient('view_test')
    asked = []
    answered = threading.Event()

    def pause(request, response):
        asked.append(request.data)
        response.success, response.message = True, 'paused' if request.data else 'running'
        answered.set()
        return response
    client.node.create_service(SetBool, '/mujoco_bridge/pause', pause)
    publisher = TwinPublisher(client.node, tmp_path / 'meshes')
    try:
        agreed = shows(browser, lambda image: dark(image) > 3000 and greenish(image) > 1000)
        assert reddish(agreed) < 50                           # sim and real agree: the ghost is green
        bad = TFMessage(transforms=[identity_transform('sim/world', 'sim/rh_forearm')])
        bad.transforms[0].transform.translation.x = float('nan')
        client.node.create_publisher(TFMessage, '/tf', TF_QOS).publish(bad)
        publisher.set_offsets({'rh_WRJ1': 0.4})                # the real wrist 0.4 rad behind the sim's
        parted = shows(browser, lambda image: reddish(image) > 1500)
        assert greenish(parted) < 0.8 * greenish(agreed) and dark(parted) > 3000   # the finger links' green gone
        assert ros.wait_until(lambda: 'dropped a message on /tf' in process.output(), 10.0)
        browser.evaluate('[...document.querySelectorAll("button")].find(b => b.textContent.trim() === "Pause")'
                         '.click(), true')
        assert answered.wait(30.0) and asked == [True]
        shows(browser, lambda image: browser.evaluate(
            '[...document.querySelectorAll("button")].some(b => b.textContent.trim() === "Resume")'), 30.0)
        assert process.alive()
    finally:
        publisher.close()
        client.close()
