"""The cell (a Shadow Hand E on a UR arm on a MiR250 base): its configuration, ``config/cell.yaml``
(``config``), the names of its parts' joints and bodies (``names``), and the cell assembled with
``MjSpec`` from the three models (``assembly``).

``from shadow_twin.model.cell import build_cell_spec`` (and the names below) keeps working: the
module was ``shadow_twin/model/cell.py`` before issue 35."""

from shadow_twin.model.cell.assembly import build_cell_spec, compile_cell, summary, write_cell_mjcf

__all__ = ['build_cell_spec', 'compile_cell', 'summary', 'write_cell_mjcf']
