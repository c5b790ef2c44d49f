"""Window geometry, dock layout and splitter sizes of an rqt window, as the bytes Qt 5 saves
(ROS-free, Qt-free).

rqt keeps a perspective's window in its ``mainwindow`` settings group: ``geometry``
(``QWidget::saveGeometry()``) and ``state`` (``QMainWindow::saveState()``), both
``QByteArray`` in ``QDataStream`` big-endian encoding (qt_gui ``main_window.py``
restores them when the perspective is loaded: the geometry before the plugins start,
the state once their dock widgets exist). This module writes those bytes for a
window of given size whose dock widgets sit in a grid, so that a generated
perspective opens at a known size instead of as one row of docks as wide as the sum
of their minimum widths.

Formats (Qt 5.15 ``qwidget.cpp``, ``qmainwindow.cpp``, ``qmainwindowlayout.cpp``,
``qdockarealayout.cpp``, ``qtoolbararealayout.cpp``; checked byte for byte against
what rqt itself saves):

* geometry, version 3.0: magic ``0x1D9D0CB``, major 3, minor 0 (quint16 each),
  frame and normal geometry (QRect: left, top, right, bottom), screen number,
  maximized, full screen (quint8 each), screen width (px), geometry (QRect).
* state: version marker ``0xff`` and version 0 (int32); dock areas (marker ``0xfd``,
  the number of non-empty areas, then per area its index (left 0, right 1, top 2,
  bottom 3), size and layout tree), the central widget's size, the four corners'
  areas; then the tool bars (marker ``0xfc``, lines of tool bars). A layout tree is a
  sequence (marker ``0xfc``, orientation: 1 horizontal, 2 vertical, item count) of
  dock widgets (marker ``0xfb``, object name, flags (1 = visible), position, size,
  minimum and maximum size along the sequence, px) and nested sequences (marker
  ``0xfc``, the same four numbers, then the nested sequence). Qt reads the minimum and
  maximum back but does not use them; positions and sizes are the starting point from
  which it fits the docks to the window.
* splitter (``QSplitter::saveState()``, version 1; plugins store it in their settings, as
  rqt_robot_monitor its ``splitter``): magic ``0xff``, version 1, the panes' sizes
  (QList<int>: count, sizes px), children collapsible (bool), handle width (px),
  opaque resize (bool), orientation (1 horizontal, 2 vertical), opaque resize set (bool).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence, Union

#: Qt's QWIDGETSIZE_MAX: "no maximum size", px.
NO_MAXIMUM = (1 << 24) - 1
#: Width of the splitter between two docks in rqt's style (QStyle::PM_DockWidgetSeparatorExtent), px.
SEPARATOR = 6
#: The tool bar qt_gui adds to every rqt window (hidden until a dock is minimized), bottom area.
MINIMIZED_DOCKS_TOOLBAR = 'MinimizedDockWidgetsToolbar'

_BOTTOM_AREA = 3                       # QInternal::BottomDock
_CORNERS = (4, 4, 8, 8)                # top-left/right: Qt::TopDockWidgetArea, bottom-left/right: Bottom
_HORIZONTAL, _VERTICAL = 1, 2          # Qt::Orientation
_VERSION_MARKER, _DOCK_STATE, _SEQUENCE, _WIDGET, _TOOLBAR_STATE = 0xff, 0xfd, 0xfc, 0xfb, 0xfc
_GEOMETRY_MAGIC = 0x1D9D0CB


@dataclass(frozen=True)
class Dock:
    """A dock widget, by its object name (rqt: ``<package>__<class>__<serial>__<widget object name>``)."""

    name: str


@dataclass(frozen=True)
class Split:
    """Docks side by side (``horizontal``) or stacked (``vertical``), each with its share of the
    length along that direction (weights, any positive numbers)."""

    horizontal: bool
    parts: tuple[tuple['Layout', float], ...]


Layout = Union[Dock, Split]


def row(*docks: Layout) -> Split:
    """Equal-width docks side by side."""
    return Split(True, tuple((d, 1.0) for d in docks))


def column(*parts: tuple[Layout, float]) -> Split:
    """Docks stacked top to bottom, with height weights."""
    return Split(False, tuple(parts))


class _Stream:
    """The subset of QDataStream (Qt 5, big-endian) the two formats use."""

    def __init__(self) -> None:
        self.data = bytearray()

    def u8(self, value: int) -> None:
        self.data += struct.pack('>B', value)

    def u16(self, value: int) -> None:
        self.data += struct.pack('>H', value)

    def i32(self, *values: int) -> None:
        self.data += struct.pack(f'>{len(values)}i', *values)

    def u32(self, value: int) -> None:
        self.data += struct.pack('>I', value)

    def string(self, text: str) -> None:
        encoded = text.encode('utf-16-be')
        self.u32(len(encoded))
        self.data += encoded

    def rect(self, x: int, y: int, width: int, height: int) -> None:
        self.i32(x, y, x + width - 1, y + height - 1)


def window_geometry(x: int, y: int, width: int, height: int, screen_width: int) -> bytes:
    """``QWidget::saveGeometry()`` of a normal (not maximized) window at (``x``, ``y``) with a
    ``width`` x ``height`` client area on screen 0, ``screen_width`` px wide."""
    s = _Stream()
    s.u32(_GEOMETRY_MAGIC)
    s.u16(3)
    s.u16(0)
    s.rect(x, y, width, height)          # frame geometry (no window manager frame assumed)
    s.rect(x, y, width, height)          # normal geometry
    s.i32(0)                             # screen number
    s.u8(0)                              # maximized
    s.u8(0)                              # full screen
    s.i32(screen_width)
    s.rect(x, y, width, height)          # geometry
    return bytes(s.data)


def _lengths(total: int, weights: Sequence[float]) -> list[int]:
    """Split ``total`` px minus the separators between ``len(weights)`` items by weight."""
    free = total - SEPARATOR * (len(weights) - 1)
    out = [int(free * w / sum(weights)) for w in weights]
    out[-1] = free - sum(out[:-1])
    return out


def _sequence(s: _Stream, split: Split, width: int, height: int) -> None:
    s.u8(_SEQUENCE)
    s.u8(_HORIZONTAL if split.horizontal else _VERTICAL)
    s.i32(len(split.parts))
    lengths = _lengths(width if split.horizontal else height, [w for _, w in split.parts])
    pos = 0
    for (part, _), length in zip(split.parts, lengths):
        if isinstance(part, Dock):
            s.u8(_WIDGET)
            s.string(part.name)
            s.u8(1)                                       # visible, docked
            s.i32(pos, length, 0, NO_MAXIMUM)
        else:
            s.u8(_SEQUENCE)
            s.i32(pos, length, 0, NO_MAXIMUM)
            _sequence(s, part, length if split.horizontal else width, height if split.horizontal else length)
        pos += length + SEPARATOR


def window_state(layout: Layout, width: int, height: int) -> bytes:
    """``QMainWindow::saveState()`` of an rqt window whose dock widgets fill the bottom dock
    area (where rqt puts every plugin's dock) as ``layout``, ``width`` x ``height`` px, with
    rqt's hidden minimized-docks tool bar."""
    if isinstance(layout, Dock):
        layout = row(layout)
    s = _Stream()
    s.i32(_VERSION_MARKER, 0)
    s.u8(_DOCK_STATE)
    s.i32(1)                                  # one non-empty dock area
    s.i32(_BOTTOM_AREA, width, height)
    _sequence(s, Split(True, ((layout, 1.0),)) if not layout.horizontal else layout, width, height)
    s.i32(width, 0)                           # central widget: none
    s.i32(*_CORNERS)
    s.u8(_TOOLBAR_STATE)
    s.i32(1)                                  # one line of tool bars
    s.i32(_BOTTOM_AREA, 1)
    s.string(MINIMIZED_DOCKS_TOOLBAR)
    s.u8(0)                                   # hidden
    s.i32(0, -1)                              # position, size (-1: its own)
    s.u32(0)                                  # geometry (packed; only for floating tool bars)
    s.u32(0)
    return bytes(s.data)


def splitter_state(sizes: Sequence[int], vertical: bool, handle_width: int) -> bytes:
    """``QSplitter::saveState()`` of a splitter with panes of ``sizes`` px, stacked (``vertical``)
    or side by side, whose handles are ``handle_width`` px (as its .ui sets them)."""
    s = _Stream()
    s.i32(_VERSION_MARKER, 1)
    s.i32(len(sizes), *sizes)
    s.u8(1)                                   # children collapsible (Qt's default)
    s.i32(handle_width)
    s.u8(1)                                   # opaque resize (the style's default)
    s.i32(_VERTICAL if vertical else _HORIZONTAL)
    s.u8(0)                                   # opaque resize not set explicitly
    return bytes(s.data)
