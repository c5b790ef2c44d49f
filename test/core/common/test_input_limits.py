"""Inputs that cannot end or are too big to hold are refused early, with the limit in the message
(issue 34, item 8: an endless input file was read until memory ran out; a 10^6-point trajectory
grew past 11 GB)."""

from __future__ import annotations

import os

import pytest
import yaml

from shadow_twin.cli.identify import main as identify
from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.common.files import read_text_limited
from shadow_twin.control import trajectory
from shadow_twin.simulation.effort import DriveParameters


def test_devices_fifos_and_big_files_are_not_read(tmp_path):
    with pytest.raises(ConfigError, match='CSV log /dev/zero: not a regular file'):
        read_text_limited('/dev/zero', 'CSV log')
    fifo = tmp_path / 'pipe'
    os.mkfifo(fifo)                                    # opening it would wait for a writer forever
    with pytest.raises(ConfigError, match='not a regular file'):
        read_text_limited(fifo)
    big = tmp_path / 'big.csv'
    with open(big, 'wb') as handle:                    # sparse: 3 MiB that take no disk
        handle.truncate(3 * 1024 * 1024)
    with pytest.raises(ConfigError, match=r'3 MiB, over the 2 MiB read whole'):
        read_text_limited(big, 'CSV log', limit=2 * 1024 * 1024)
    (tmp_path / 'bad.txt').write_bytes(b'\xff\xfe\x00')
    with pytest.raises(ConfigError, match='not UTF-8'):
        read_text_limited(tmp_path / 'bad.txt')
    (tmp_path / 'ok.txt').write_text('a,b\n')
    assert read_text_limited(tmp_path / 'ok.txt') == 'a,b\n'


def test_identify_refuses_an_endless_csv_in_one_line(tmp_path, capsys):
    out = tmp_path / 'out'
    assert identify(['--arm', 'ur5', '--csv', '/dev/zero', '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and '/dev/zero: not a regular file' in err[0] and not out.exists()


def test_a_drive_parameter_file_that_is_a_device_is_one_line():
    with pytest.raises(ConfigError, match='not a regular file'):
        DriveParameters.from_yaml('/dev/zero')


def test_a_trajectory_with_too_many_waypoints_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(trajectory, 'MAX_WAYPOINTS', 10)
    path = tmp_path / 'long.yaml'
    path.write_text(yaml.safe_dump({'hand_joints_order': ['FFJ3'], 'hand_trajectories': {
        'long': [{'joint_angles': [0.01 * k], 'interpolate_time': 0.1} for k in range(11)]}}))
    with pytest.raises(TrajectoryError, match="trajectory 'long' has 11 waypoints, more than 10"):
        trajectory.load_waypoint_yaml(path, 'long')
    with pytest.raises(TrajectoryError, match='not a regular file'):
        trajectory.load_waypoint_yaml('/dev/zero', 'long')
