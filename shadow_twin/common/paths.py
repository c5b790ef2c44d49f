"""Where the package's shared files (config/, launch/) are: the source checkout
when running from one (editable install), else the ament share directory of a
colcon install."""

from __future__ import annotations

from pathlib import Path

PACKAGE = 'shadow_twin'


def share_dir() -> Path:
    """The source checkout's root if it has ``config/``, else ``share/shadow_twin``.

    Raises FileNotFoundError if neither is found.
    """
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / 'config').is_dir():
        return checkout
    try:
        from ament_index_python.packages import get_package_share_directory  # lazy: present on a ROS 2 install only
        return Path(get_package_share_directory(PACKAGE))
    except Exception as exc:  # ImportError, PackageNotFoundError, unset AMENT_PREFIX_PATH
        raise FileNotFoundError(f'cannot find the {PACKAGE} share directory ({exc})') from None


def config_path(*parts: str) -> Path:
    """Path of a shipped config file, e.g. ``config_path('calibration', 'fingers_j123.yaml')``."""
    return share_dir().joinpath('config', *parts)


#: URL prefix of this package's shared files in parameter files (ROS's ``package://`` convention).
PACKAGE_URL = f'package://{PACKAGE}/'


def resolve_share_url(text: str) -> Path:
    """``package://shadow_twin/<path>`` -> that file of the share directory (``config/...``);
    any other text is a path as given. (Built-in models, ``package://shadow_twin/models/...``,
    are resolved by ``shadow_twin.model.mjcf.resolve_model_path``.)"""
    if text.startswith(PACKAGE_URL):
        return share_dir() / text[len(PACKAGE_URL):]
    return Path(text)
