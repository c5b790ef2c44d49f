"""The lifeline: a child process ends when its parent ends, however the parent ends.

The parent makes one pipe and keeps its write end open for as long as it lives, writing
nothing; each child it starts inherits the read end (``pass_fds``) and learns its number
from the environment (:data:`ENV`). The kernel closes the write end when the parent's
process ends (SIGKILL included), and a read on the pipe then returns end-of-file: the child
watches for that in a daemon thread (:func:`watch_parent`) and stops.

``PR_SET_PDEATHSIG`` alone does not do this: it fires when the *thread* that forked the
child ends (a respawn from a worker thread), and it cannot be passed through a process that
does not set it (``ros2 launch``). The pipe holds for as long as the parent process lives.

The read end is identified by its inode as well as its number, so a grandchild that
inherited the environment but not the descriptor (a process started by a child that closes
its descriptors, as Python's ``subprocess`` and ``ros2 launch`` do) ignores the variable
instead of reading an unrelated file. A child that reads its lifeline removes the variable
from its own environment.
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import sys
import threading
from typing import Callable, Mapping

#: Environment variable holding "<read fd>:<pipe inode>".
ENV = 'SHADOW_TWIN_LIFELINE'

_PR_SET_PDEATHSIG = 1

_lock = threading.Lock()
_pipe: tuple[int, int] | None = None     # (read fd, write fd) of this process's lifeline


def _own_pipe() -> tuple[int, int]:
    global _pipe
    with _lock:
        if _pipe is None:
            _pipe = os.pipe()           # both ends non-inheritable; the write end is never written
        return _pipe


def child_options(env: Mapping[str, str] | None = None) -> dict:
    """Keyword arguments for ``subprocess.Popen`` that give the child this process's lifeline:
    ``env`` (a copy of ``env``, default ``os.environ``, with :data:`ENV` set) and ``pass_fds``.
    Starting a child this way keeps the pipe's write end open in this process until it exits."""
    read, _ = _own_pipe()
    env = dict(os.environ if env is None else env)
    env[ENV] = f'{read}:{os.fstat(read).st_ino}'
    return {'env': env, 'pass_fds': (read,)}


def inherited_fd(value: str | None = None) -> int | None:
    """The read end of the lifeline this process inherited, or None (no variable, a malformed
    one, or a descriptor that is not that pipe). ``value`` defaults to ``os.environ[ENV]``."""
    value = os.environ.get(ENV) if value is None else value
    if not value:
        return None
    fd_text, _, inode_text = value.partition(':')
    try:
        fd, inode = int(fd_text), int(inode_text)
        info = os.fstat(fd)
    except (ValueError, OSError):
        return None
    return fd if stat.S_ISFIFO(info.st_mode) and info.st_ino == inode else None


def watch_parent(on_parent_gone: Callable[[], None]) -> bool:
    """Call ``on_parent_gone()`` (from a daemon thread) once the parent that passed this process
    its lifeline has ended. Removes :data:`ENV` from this process's environment. Returns False
    when this process has no lifeline (started by something else: nothing is watched)."""
    fd = inherited_fd()
    os.environ.pop(ENV, None)
    if fd is None:
        return False

    def watch() -> None:
        try:
            while os.read(fd, 1):       # the parent never writes: only end-of-file returns
                pass
        except OSError:
            pass
        on_parent_gone()

    threading.Thread(target=watch, name='lifeline', daemon=True).start()
    return True


def death_signal(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` (Linux; None elsewhere): the child gets ``sig``
    when the thread that started it ends (``PR_SET_PDEATHSIG``). For children that cannot take a
    lifeline (``ros2 launch``, Xvfb), started from a thread that lives as long as the process,
    and beside the lifeline for those that can."""
    if not sys.platform.startswith('linux'):
        return None

    def set_death_signal() -> None:     # runs in the child between fork and exec
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))
        except (OSError, AttributeError):
            pass
    return set_death_signal
