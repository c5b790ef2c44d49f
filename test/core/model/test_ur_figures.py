"""UR's figures shipped with the project (shadow_twin/model/ur/figures.py,
shadow_twin/model/builtin/ur_arms.yaml): the same facts as UR's description files, used when no
description is given or installed, so ``--arm ur10e`` works on a fresh install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.ur import figures as ur_figures
from shadow_twin.model.ur.arm import arm_xml, effort_limits
from shadow_twin.model.ur.description import DESCRIPTION_ENV, UR_TYPES, read_arm_description
from shadow_twin.model.ur.figures import arm_description, shipped_description, write_figures
from test_ur_arms import copy_description

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / 'shared' / 'reference' / 'ur_description'
needs_description = pytest.mark.skipif(not (SHARED / 'config' / 'ur5').is_dir(),
                                       reason='needs ../shared/reference/ur_description')


def _same(a, b) -> None:
    assert (a.arm_type, a.origins, a.offsets, a.links, a.limits) == (b.arm_type, b.origins, b.offsets, b.links,
                                                                     b.limits)
    assert (a.base_mass, a.base_radius, a.base_length) == (b.base_mass, b.base_radius, b.base_length)


@needs_description
@pytest.mark.parametrize('arm_type', UR_TYPES)
def test_the_shipped_figures_are_the_descriptions(arm_type):
    _same(shipped_description(arm_type), read_arm_description(arm_type, SHARED / 'config'))


def test_the_shipped_file_names_its_source_and_licence():
    head = ur_figures.shipped_figures_path().read_text().split('\ntypes:')[0]
    assert 'Universal_Robots_ROS2_Description, commit' in head and 'BSD-3-Clause' in head
    assert 'Redistributions of source code must retain the above copyright' in head and 'AS IS' in head


def test_without_a_description_every_type_is_built_from_the_shipped_figures(monkeypatch):
    """A fresh install: no description anywhere (the ROS package lookup finds none either)."""
    monkeypatch.delenv(DESCRIPTION_ENV, raising=False)
    monkeypatch.setattr(ur_figures, 'find_ur_description', lambda explicit=None: None)
    for arm_type in UR_TYPES:
        desc = arm_description(arm_type)
        assert desc.source == ur_figures.shipped_figures_path() and len(desc.links) == 6
    assert effort_limits('ur10e')['shoulder_pan_joint'] == 330.0 and 'Universal Robots UR10E, MJCF' in arm_xml('ur10e')


@needs_description
def test_a_description_given_wins_over_the_shipped_figures(tmp_path):
    limits = copy_description(tmp_path, 'ur5e') / 'joint_limits.yaml'
    limits.write_text(limits.read_text().replace('max_effort: 150.0', 'max_effort: 151.0', 1))
    assert effort_limits('ur5e', tmp_path)['shoulder_pan_joint'] == 151.0
    assert shipped_description('ur5e').limits['shoulder_pan_joint'].effort == 150.0


def test_a_damaged_shipped_file_is_one_line(tmp_path, monkeypatch):
    bad = tmp_path / 'ur_arms.yaml'
    bad.write_text('types: {ur10e: {origins: 3}}\n')
    monkeypatch.setattr(ur_figures, 'shipped_figures_path', lambda: bad)
    with pytest.raises(ConfigError) as err:
        shipped_description('ur10e')
    assert 'shipped UR figures of ur10e cannot be read' in str(err.value) and '\n' not in str(err.value)


@needs_description
def test_the_script_regenerates_the_shipped_file(tmp_path):
    out = tmp_path / 'ur_arms.yaml'
    done = subprocess.run([sys.executable, str(REPO / 'scripts' / 'ur_figures.py'), str(SHARED), '--out', str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == ur_figures.shipped_figures_path().read_text()
    with pytest.raises(ConfigError):
        write_figures(tmp_path / 'nothing', 'x', 'y', tmp_path / 'z.yaml')
    assert not (tmp_path / 'z.yaml').exists()
