"""The cell (a Shadow Hand E on a UR arm on a MiR250 base): its configuration, ``config/cell.yaml``
(``config``), the names of its parts' joints and bodies (``names``), and the cell assembled with
``MjSpec`` from the three models (``assembly``).

``from shadow_twin.model.cell import build_cell_spec`` (and the names below) keeps working: the
module was ``shadow_twin/model/cell.py`` before issue 35."""

import importlib

__all__ = ['build_cell_spec', 'compile_cell', 'summary', 'write_cell_mjcf']


def __getattr__(name: str):
    # on first use, not at import: ``assembly`` imports ``model.ur``, which imports ``cell.names``
    # (importing it here would run that circle while ``model.ur.arm`` is half initialised)
    if name in __all__:
        return getattr(importlib.import_module('shadow_twin.model.cell.assembly'), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
