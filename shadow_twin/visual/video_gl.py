"""An OpenGL context for MuJoCo's offscreen renderer without a display: EGL, or OSMesa where EGL is missing.

MuJoCo's own :class:`mujoco.Renderer` takes its GL backend from the environment variable ``MUJOCO_GL``
as it was when ``mujoco`` was *first imported* (``mujoco.gl_context``), which in this package is long before
a video is asked for (every module imports ``mujoco``), and without it picks GLFW, which needs a display.
So the videos make their context here, from the backend chosen when the first video is rendered:

* ``MUJOCO_GL`` set to ``egl``, ``osmesa`` or ``glfw`` (before the render): that backend only;
* unset (or another value): EGL (a GPU's, or Mesa's software renderer), then OSMesa if EGL fails.

A backend module (``mujoco.egl``, ``mujoco.osmesa``) sets ``PYOPENGL_PLATFORM`` when imported, and PyOpenGL
keeps the platform of its first import; so when EGL fails and nothing else had chosen the platform, this
module restores ``PYOPENGL_PLATFORM`` and forgets the PyOpenGL modules EGL loaded before trying OSMesa.
The chosen backend is kept for the process (:func:`backend`).
"""

from __future__ import annotations

import ctypes.util
import importlib
import os
import sys

from shadow_twin.common.errors import ShadowTwinError

#: Backends tried in order when ``MUJOCO_GL`` names none of :data:`KNOWN`.
DEFAULT_ORDER = ('egl', 'osmesa')
#: Backends ``MUJOCO_GL`` may name (Linux).
KNOWN = ('egl', 'osmesa', 'glfw')
#: The shared library each backend loads (``ctypes.util.find_library`` names): looked for first, for a clear reason.
LIBRARIES = {'egl': 'EGL', 'osmesa': 'OSMesa', 'glfw': 'glfw'}

_chosen: str | None = None


class RenderingUnavailable(ShadowTwinError):
    """No OpenGL backend works here (each backend's reason in the one-line message)."""


def backend() -> str | None:
    """The backend this process renders with ('egl', 'osmesa', 'glfw'), None before the first context."""
    return _chosen


def gl_context(width: int, height: int):
    """A current-able GL context (MuJoCo's ``GLContext``: ``make_current()``, ``free()``) for offscreen
    frames up to ``width`` x ``height`` px, from the backend of the module doc.

    Raises:
        RenderingUnavailable: every backend tried failed (the reasons named).
    """
    global _chosen
    order = (_chosen,) if _chosen else _order()
    reasons = []
    for name in order:
        if ctypes.util.find_library(LIBRARIES[name]) is None and name != 'glfw':     # the glfw wheel ships its own
            reasons.append(f'{name}: lib{LIBRARIES[name]} not found')
            continue
        platform_before = os.environ.get('PYOPENGL_PLATFORM')
        try:
            module = importlib.import_module(f'mujoco.{name}')     # chosen at run time: see the module doc
            context = module.GLContext(width, height)
        except Exception as exc:   # ImportError, OSError (no library), RuntimeError (no device): try the next
            reasons.append(f'{name}: {" ".join(str(exc).split()) or type(exc).__name__}')
            _forget(name, platform_before)
            continue
        _chosen = name
        return context
    raise RenderingUnavailable(f'no OpenGL backend for offscreen rendering ({"; ".join(reasons)}); install EGL '
                               f'(libegl1) or OSMesa (libosmesa6), or set MUJOCO_GL')


def _order() -> tuple[str, ...]:
    wanted = os.environ.get('MUJOCO_GL', '').strip().lower()
    return (wanted,) if wanted in KNOWN else DEFAULT_ORDER


def _forget(name: str, platform_before: str | None) -> None:
    """Undo what a failed backend's import did, so that the next one can choose PyOpenGL's platform:
    only when it was this import that chose it (``PYOPENGL_PLATFORM`` unset before)."""
    if platform_before is not None or name == 'glfw':
        return
    os.environ.pop('PYOPENGL_PLATFORM', None)
    for module in [m for m in sys.modules if m == 'OpenGL' or m.startswith(('OpenGL.', f'mujoco.{name}'))]:
        del sys.modules[module]
