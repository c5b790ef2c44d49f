"""The one conversion between seconds and ROS ``(sec, nanosec)`` time fields (ROS-free).

``builtin_interfaces/Time`` and ``Duration`` store an integer ``sec`` and a
``nanosec`` that must lie in ``[0, 1e9)``; rounding ``seconds * 1e9`` and
splitting with :func:`divmod` keeps ``nanosec`` in that range at every edge
(e.g. 0.9999999999 s is ``(1, 0)``, never ``(0, 1_000_000_000)``; -0.5 s is
``(-1, 500_000_000)``), as rclpy's ``Time.to_msg`` / ``Duration.to_msg`` do.
ROS code builds messages with rclpy's ``Time`` / ``Duration``
(``shadow_twin.ros.conversions``), which build on these.

Reading goes the other way: :func:`to_seconds` of a message and
:func:`from_nanoseconds` of the same instant as integer nanoseconds give the
same float.
"""

from __future__ import annotations

import math

NANOSECONDS_PER_SECOND = 1_000_000_000


def to_nanoseconds(seconds: float) -> int:
    """``seconds`` (s, float) as integer nanoseconds, rounded to nearest.

    The fraction is scaled apart from the whole seconds (``x - floor(x)`` is exact), so
    an epoch time (~1.7e9 s, which a double resolves to ~0.24 us) comes back exactly
    from its ``(sec, nanosec)`` fields; ``round(seconds * 1e9)`` would round to 256 ns
    steps there. Raises ValueError/OverflowError for NaN/inf.
    """
    seconds = float(seconds)
    whole = math.floor(seconds)
    return whole * NANOSECONDS_PER_SECOND + int(round((seconds - whole) * NANOSECONDS_PER_SECOND))


def split_nanoseconds(nanoseconds: int) -> tuple[int, int]:
    """Integer nanoseconds as normalised ``(sec, nanosec)``: ``0 <= nanosec < 1e9``."""
    sec, nanosec = divmod(int(nanoseconds), NANOSECONDS_PER_SECOND)
    return sec, nanosec


def to_sec_nanosec(seconds: float) -> tuple[int, int]:
    """``seconds`` (s) as normalised ``(sec, nanosec)`` (see the module doc)."""
    return split_nanoseconds(to_nanoseconds(seconds))


def to_seconds(stamp) -> float:
    """Seconds of anything with ``sec`` and ``nanosec`` fields (Time, Duration, rosbags
    messages), or of a plain number of seconds (returned as float)."""
    if hasattr(stamp, 'sec'):
        return float(stamp.sec) + float(stamp.nanosec) * 1e-9
    return float(stamp)


def from_nanoseconds(nanoseconds: int) -> float:
    """Seconds (s) of integer ``nanoseconds`` (e.g. ``rclpy`` ``Time.nanoseconds``, a bag's
    receive time); equal to :func:`to_seconds` of the ``(sec, nanosec)`` message of it."""
    sec, nanosec = split_nanoseconds(nanoseconds)
    return float(sec) + float(nanosec) * 1e-9
