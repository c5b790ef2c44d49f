"""Conversions between the core's numpy/seconds values and ROS messages.

Times go through rclpy's ``Time`` / ``Duration`` on top of the core's one
seconds -> nanoseconds rounding (``shadow_twin.common.stamps``), so every
``nanosec`` field is normalised to ``[0, 1e9)``.
"""

from __future__ import annotations

import array

from builtin_interfaces.msg import Duration as DurationMsg, Time as TimeMsg
from rclpy.duration import Duration
from rclpy.time import Time

from shadow_twin.common.stamps import to_nanoseconds


def doubles(values) -> array.array:
    """A float64 ``array.array`` of a numpy array (what rclpy accepts fastest for ``float64[]`` fields)."""
    out = array.array('d')
    out.frombytes(memoryview(values.astype('float64', copy=False).tobytes()))
    return out


def time_msg(seconds: float) -> TimeMsg:
    """``builtin_interfaces/Time`` of ``seconds`` (s since the clock's epoch, >= 0)."""
    return Time(nanoseconds=max(0, to_nanoseconds(seconds))).to_msg()


def time_msg_ns(nanoseconds: int) -> TimeMsg:
    """``builtin_interfaces/Time`` of integer ``nanoseconds`` (>= 0)."""
    return Time(nanoseconds=max(0, int(nanoseconds))).to_msg()


def duration_msg(seconds: float) -> DurationMsg:
    """``builtin_interfaces/Duration`` of ``seconds`` (s; negative values are clamped to 0)."""
    return Duration(nanoseconds=max(0, to_nanoseconds(seconds))).to_msg()
