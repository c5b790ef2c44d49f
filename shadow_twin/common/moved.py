"""Modules issue 35 moved into folders: their old names stay importable for one release, each
import warning (``DeprecationWarning``, naming the new name) and giving the module of the new name.

Each package whose modules moved calls :func:`install` in its ``__init__``; :data:`MOVED` is the
one table of old -> new names. Removed in the next release: import the new names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: Old module name -> new module name.
MOVED: dict[str, str] = {}


def _moved(package: str, table: dict[str, str]) -> None:
    MOVED.update({f'{package}.{old}': f'{package}.{new}' for old, new in table.items()})


_moved('shadow_twin.ros', {
    'twin_server': 'twin.server', 'twin_goal': 'twin.goal', 'twin_screening': 'twin.screening',
    'twin_dispatch': 'twin.dispatch', 'twin_preview': 'twin.preview', 'twin_inputs': 'twin.inputs',
    'twin_parameters': 'twin.parameters', 'preview_server': 'twin.preview_server',
    'base_driver': 'twin.base.driver', 'base_settings': 'twin.base.settings', 'base_anchor': 'twin.base.anchor',
    'base_endpoint': 'twin.base.endpoint', 'cmd_vel_watch': 'twin.base.cmd_vel_watch',
    'twin_monitor': 'monitor.node', 'monitor_aggregated': 'monitor.aggregated', 'monitor_drift': 'monitor.drift',
    'monitor_effort': 'monitor.effort', 'monitor_parameters': 'monitor.parameters',
    'monitor_shadow': 'monitor.shadow', 'monitor_values': 'monitor.values'})
_moved('shadow_twin.simulation', {
    'live_base': 'live.base', 'live_following': 'live.following', 'live_reload': 'live.reload',
    'live_trajectories': 'live.trajectories', 'preview_checks': 'preview.checks',
    'preview_config': 'preview.config', 'preview_contacts': 'preview.contacts',
    'preview_windows': 'preview.windows'})
_moved('shadow_twin.calibration', {
    'bag_reader': 'recordings.bag_reader', 'recording': 'recordings.recording',
    'alignment': 'recordings.alignment', 'frame': 'recordings.frame',
    'base_recording': 'recordings.base_recording', 'bag_comparison': 'recordings.bag_comparison',
    'metrics': 'scoring.metrics', 'stability': 'scoring.stability', 'evaluation': 'scoring.evaluation',
    'evaluator_set': 'scoring.evaluator_set', 'base_evaluation': 'scoring.base_evaluation',
    'search_space': 'search.search_space', 'optimisers': 'search.optimisers',
    'least_squares': 'search.least_squares', 'identifiability': 'search.identifiability',
    'run_settings': 'engine.run_settings', 'executor': 'engine.executor', 'shipped': 'engine.shipped',
    'run': 'engine.run', 'report': 'engine.report', 'sensitivity': 'engine.sensitivity', 'job': 'jobs.job',
    'cell_job': 'jobs.cell_job', 'cell_result': 'jobs.cell_result', 'protocol': 'jobs.protocol',
    'plan': 'jobs.plan'})
#: twin_split's concepts became the package shadow_twin.twin (its modules re-exported there).
MOVED['shadow_twin.control.twin_split'] = 'shadow_twin.twin'
_moved('shadow_twin.control', {
    'base_follower': 'base.follower', 'base_goal_rules': 'base.goal_rules', 'base_trajectory': 'base.trajectory'})
_moved('shadow_twin.model', {
    'cell_config': 'cell.config', 'cell_names': 'cell.names',
    'ur_arm': 'ur.arm', 'ur_arm_mjcf': 'ur.arm_mjcf', 'ur_description': 'ur.description',
    'ur_figures': 'ur.figures'})
_moved('shadow_twin.monitoring', {
    'joint_comparison': 'joint.comparison', 'joint_error': 'joint.error', 'joint_samples': 'joint.samples'})


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name of :data:`MOVED` and loads it as the module of its new name."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        return None                      # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module) -> None:
        new = MOVED[module.__name__]
        warnings.warn(f'{module.__name__} is now {new} (issue 35); the old name goes in the next release',
                      DeprecationWarning, stacklevel=2)
        sys.modules[module.__name__] = importlib.import_module(new)   # the import returns this one


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())
