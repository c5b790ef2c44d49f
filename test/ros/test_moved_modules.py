"""The modules issue 35 moved into folders stay importable under their old flat names for one
release: each such import warns (DeprecationWarning, naming the new name) and gives the very
module of the new name (the ROS ones need rclpy: the test lives here)."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

pytest.importorskip('rclpy')

from shadow_twin.common.moved import MOVED  # noqa: E402

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)


@pytest.mark.parametrize('old', sorted(MOVED))
def test_an_old_name_warns_and_gives_the_new_module(old):
    importlib.import_module(old.rpartition('.')[0])             # its package installs the finder
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf'{re.escape(old)} is now {re.escape(MOVED[old])}'):
        module = importlib.import_module(old)
    assert module is new and module.__name__ == MOVED[old]


def test_a_name_never_moved_is_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module('shadow_twin.ros.twin_nothing')
