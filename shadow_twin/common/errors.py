"""Exception types of shadow_twin.

Every error that bad user input can cause is a :class:`ShadowTwinError`, so the
command line can print it as one line and exit non-zero, while programming
errors still show a traceback.
"""


class ShadowTwinError(Exception):
    """Base class: a problem with the user's input, named in the message."""


class ModelError(ShadowTwinError):
    """An MJCF model is missing, does not compile, or lacks a named element."""


class ModelTooLarge(ModelError):
    """An MJCF model (with its includes) holds more bytes than the limit it was loaded with."""


class RecordingError(ShadowTwinError):
    """A bag is missing, unreadable, or its joint states are unusable."""


class TrajectoryError(ShadowTwinError):
    """A trajectory file or message is malformed or inconsistent."""


class GoalRejectedError(TrajectoryError):
    """An action server rejected a goal: nothing moved, so it may be sent again (the twin rejects
    a goal whose controllers do not all accept their parts before its start, which a loaded PC
    can cause)."""


class SearchSpaceError(ShadowTwinError):
    """A search-space YAML names unknown joints/attributes or bad bounds."""


class BadMessage(ShadowTwinError, ValueError):
    """An incoming message a node drops (NaN, a negative stamp, a value out of range...): the text
    names the field and what is wrong with it (``shadow_twin.ros.message_checks``)."""


class ConfigError(ShadowTwinError):
    """A configuration YAML (gains, joint map, CLI arguments) is invalid."""


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (MuJoCo's compiler and parser errors span several)."""
    return ' '.join(str(exc).split())
