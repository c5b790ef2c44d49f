"""The one conversion between seconds and ROS ``(sec, nanosec)`` time fields (ROS-free).

``builtin_interfaces/Time`` and ``Duration`` store an integer ``sec`` and a
``nanosec`` that must lie in ``[0, 1e9)``; rounding ``seconds * 1e9`` and
splitting with :func:`divmod` keeps ``nanosec`` in that range at every edge
(e.g. 0.9999999999 s is ``(1, 0)``, never ``(0, 1_000_000_000)``; -0.5 s is
``(-1, 500_000_000)``), as rclpy's ``Time.to_msg`` / ``Duration.to_msg`` do.
ROS code uses rclpy's ``Time`` / ``Duration`` (``shadow_twin.ros.conversions``),
which build on these.
"""

from __future__ import annotations

NANOSECONDS_PER_SECOND = 1_000_000_000


def to_nanoseconds(seconds: float) -> int:
    """``seconds`` (s, float) as integer nanoseconds, rounded to nearest."""
    return int(round(float(seconds) * NANOSECONDS_PER_SECOND))


def split_nanoseconds(nanoseconds: int) -> tuple[int, int]:
    """Integer nanoseconds as normalised ``(sec, nanosec)``: ``0 <= nanosec < 1e9``."""
    sec, nanosec = divmod(int(nanoseconds), NANOSECONDS_PER_SECOND)
    return sec, nanosec


def to_sec_nanosec(seconds: float) -> tuple[int, int]:
    """``seconds`` (s) as normalised ``(sec, nanosec)`` (see the module doc)."""
    return split_nanoseconds(to_nanoseconds(seconds))


def to_seconds(stamp) -> float:
    """Seconds of anything with ``sec`` and ``nanosec`` fields (Time, Duration, rosbags
    messages), or of a plain number (returned as float)."""
    if isinstance(stamp, (int, float)):
        return float(stamp)
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9
