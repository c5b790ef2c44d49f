"""The cell as the base calibration tests load it: a fresh (twin, controller) per test (fixture
``cell``), from the MJCF ``support.arm_cell.cell_file`` writes once per module."""

from __future__ import annotations

import pytest

from support import arm_cell
from support.arm_cell import load_cell

cell_file = arm_cell.cell_file        # the fixture the base modules take too


@pytest.fixture
def cell(cell_file):
    """(twin, controller) of the built-in cell, loaded anew for each test (~10 ms): model
    parameters are set in place and a SimController converts the motors of the model it is
    given, so a module-wide model would carry one test's changes into the next."""
    return load_cell(cell_file)
