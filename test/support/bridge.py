"""A hand bridge for a test module of its own: the shipped ``config/mujoco_bridge.yaml`` with some
parameters changed, in a namespace of its own (its topics and services under ``/<ns>``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def namespaced_bridge(ros, folder: Path, ns: str, ready: Callable[[], bool], timeout: float = 30.0, **params):
    """Start ``mujoco_bridge`` in namespace ``ns`` (``/ctl``) with ``params`` over the shipped parameters
    (its joint states on ``<ns>/joint_states``, its action ``<ns>/follow_joint_trajectory``, no viewer);
    waits until ``ready()`` (e.g. a recorder got a message) and returns the process. Fails the test
    with the bridge's output when it is not ready within ``timeout`` s or exits."""
    helpers, _ = ros
    values = yaml.safe_load((REPO / 'config' / 'mujoco_bridge.yaml').read_text())
    values['/**/mujoco_bridge']['ros__parameters'].update(
        {'joint_states_topic': f'{ns}/joint_states', 'action_name': f'{ns}/follow_joint_trajectory',
         'viewer': False, **params})
    (folder / 'params.yaml').write_text(yaml.safe_dump(values))
    proc = helpers.NodeProcess('mujoco_bridge.main', ['-r', f'__ns:={ns}', '--params-file', str(folder / 'params.yaml')],
                               folder / 'bridge.log')
    if not helpers.wait_until(lambda: ready() or not proc.alive(), timeout) or not proc.alive():
        proc.stop()
        pytest.fail(f'the bridge in {ns} did not get ready:\n{proc.output()}')
    return proc


def call(ros, srv, service: str, **fields):
    """Call ``service`` (a full name, e.g. ``/ctl/mujoco_bridge/step_simulation``) of type ``srv`` with a
    request whose ``fields`` are set; returns the response."""
    request = srv.Request()
    for key, value in fields.items():
        setattr(request, key, value)
    return ros[1].call(srv, service, request)
