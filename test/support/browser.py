"""Headless Chromium driven over the DevTools protocol, for the browser view's test and benchmark.

Chromium comes from the distribution's package (``scripts/setup.sh`` installs ``chromium``; nothing is
downloaded). It draws WebGL in software (SwiftShader through ANGLE) and talks DevTools over a pair of
pipes (``--remote-debugging-pipe``: fd 3 its commands, fd 4 its answers, NUL-terminated JSON), so no port
is opened and Chromium ends when this process does, however it ends (its end of the pipe closes).

:class:`HeadlessChromium` opens one page and takes screenshots (:meth:`~HeadlessChromium.screenshot`, an
(H, W, 3) uint8 array) and evaluates JavaScript; :meth:`~HeadlessChromium.close` ends Chromium and every
process of its group.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
from PIL import Image

#: Chromium's executable names, in the order looked for.
NAMES = ('chromium', 'chromium-browser')
#: Hides viser's notifications (its "software WebGL" note would cover the scene's corner).
HIDE_NOTIFICATIONS = ('const s = document.createElement("style"); s.textContent = '
                      '".mantine-Notifications-root {display: none !important}"; document.head.appendChild(s); true')


def find_chromium() -> str | None:
    """The path of Chromium's executable, or None when it is not installed."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class DevToolsError(RuntimeError):
    """Chromium answered a command with an error, did not answer in time, or ended."""


class HeadlessChromium:
    """A headless Chromium with one page of ``width`` x ``height`` CSS pixels.

    Args:
        log_path: file receiving Chromium's own output.
        width, height: the page's size, px.
        init_script: JavaScript run in the page before its own scripts (on every navigation).
    Raises:
        FileNotFoundError: Chromium is not installed.
        DevToolsError: it did not start.
    """

    def __init__(self, log_path: Path, width: int = 1200, height: int = 800, init_script: str = '') -> None:
        executable = find_chromium()
        if executable is None:
            raise FileNotFoundError('chromium is not installed (bash scripts/setup.sh installs it)')
        self.profile = tempfile.mkdtemp(prefix='shadow_twin_chromium_')
        to_chrome, self._commands = os.pipe()
        self._answers, from_chrome = os.pipe()
        args = [executable, '--headless=new', '--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
                '--ignore-gpu-blocklist', f'--window-size={width},{height}', '--hide-scrollbars', '--mute-audio',
                '--no-first-run', '--no-default-browser-check', '--disable-extensions', '--disable-sync',
                '--disable-background-networking', '--disable-component-update', '--disable-dev-shm-usage',
                '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
                '--disable-backgrounding-occluded-windows', f'--user-data-dir={self.profile}',
                '--remote-debugging-pipe', 'about:blank']
        self._log = open(log_path, 'wb')
        # bash (dash takes one-digit fds only) puts the pipes on fd 3 and 4, where Chromium looks for them, and execs it
        self.proc = subprocess.Popen(['/bin/bash', '-c', f'exec "$@" 3<&{to_chrome} 4>&{from_chrome}', 'bash', *args],
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     pass_fds=(to_chrome, from_chrome), start_new_session=True)
        os.close(to_chrome)
        os.close(from_chrome)
        self._next_id = 0
        self._lock = threading.Lock()
        self._answered: dict[int, dict] = {}
        self._events: list[dict] = []
        self._arrived = threading.Condition(self._lock)
        self._reader = threading.Thread(target=self._read, name='devtools', daemon=True)
        self._reader.start()
        self.session = ''
        try:
            target = self.send('Target.createTarget', {'url': 'about:blank'}, session=None, timeout=60.0)['targetId']
            self.session = self.send('Target.attachToTarget', {'targetId': target, 'flatten': True},
                                     session=None)['sessionId']
            self.send('Emulation.setDeviceMetricsOverride', {'width': width, 'height': height,
                                                             'deviceScaleFactor': 1, 'mobile': False})
            self.send('Page.enable')
            self.send('Runtime.enable')
            if init_script:
                self.send('Page.addScriptToEvaluateOnNewDocument', {'source': init_script})
        except BaseException:
            self.close()                            # no Chromium left behind
            raise

    def _read(self) -> None:
        buffer = b''
        while True:
            try:
                chunk = os.read(self._answers, 1 << 16)
            except OSError:
                chunk = b''
            if not chunk:
                with self._arrived:
                    self._answered[-1] = {'error': {'message': 'chromium closed its pipe'}}
                    self._arrived.notify_all()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b'\0')
            with self._arrived:
                for raw in messages:
                    message = json.loads(raw)
                    if 'id' in message:
                        self._answered[message['id']] = message
                    else:
                        self._events.append(message)
                self._arrived.notify_all()

    def send(self, method: str, params: dict | None = None, session: str | None = '', timeout: float = 20.0) -> dict:
        """Send one DevTools command (to the page's session unless ``session`` is None: the browser's) and
        wait for its result. Raises DevToolsError."""
        with self._lock:
            self._next_id += 1
            number = self._next_id
        message = {'id': number, 'method': method, 'params': params or {}}
        if session is not None and self.session:
            message['sessionId'] = self.session
        os.write(self._commands, json.dumps(message).encode() + b'\0')
        deadline = time.monotonic() + timeout
        with self._arrived:
            while number not in self._answered and -1 not in self._answered:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DevToolsError(f'{method}: no answer within {timeout:g} s')
                self._arrived.wait(left)
            answer = self._answered.pop(number, None) or self._answered[-1]
        if 'error' in answer:
            raise DevToolsError(f'{method}: {answer["error"].get("message")}')
        return answer.get('result', {})

    def open(self, url: str, timeout: float = 30.0) -> None:
        """Load ``url`` and wait for its load event."""
        with self._arrived:
            self._events.clear()
        self.send('Page.navigate', {'url': url})
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not any(e.get('method') == 'Page.loadEventFired' for e in self._events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DevToolsError(f'{url} did not load within {timeout:g} s')
                self._arrived.wait(left)

    def evaluate(self, expression: str, timeout: float = 20.0):
        """The value of a JavaScript expression in the page (JSON-able). Raises DevToolsError: it threw."""
        result = self.send('Runtime.evaluate', {'expression': expression, 'returnByValue': True,
                                                'awaitPromise': True}, timeout=timeout)
        if 'exceptionDetails' in result:
            raise DevToolsError(f'{expression[:60]}...: {result["exceptionDetails"].get("text")}')
        return result.get('result', {}).get('value')

    def screenshot_png(self) -> bytes:
        """The page as drawn now, PNG."""
        return base64.b64decode(self.send('Page.captureScreenshot', {'format': 'png'}, timeout=60.0)['data'])

    def screenshot(self) -> np.ndarray:
        """The page as drawn now: (H, W, 3) uint8 RGB."""
        return np.asarray(Image.open(io.BytesIO(self.screenshot_png())).convert('RGB'))

    def processes(self) -> list[psutil.Process]:
        """Chromium's processes now: itself and its helpers (GPU, renderers, zygotes)."""
        try:
            main = psutil.Process(self.proc.pid)
            return [main, *main.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def close(self) -> int | None:
        """End Chromium and every process of its (waiting until none is left); returns its exit status."""
        family = self.processes()
        try:
            os.close(self._commands)                # Chromium ends when its command pipe closes
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for process in family:                      # helpers in a session of their own too
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(family, timeout=10.0)
        self.proc.wait(timeout=10.0)
        self._reader.join(timeout=5.0)
        try:
            os.close(self._answers)
        except OSError:
            pass
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        return self.proc.returncode
