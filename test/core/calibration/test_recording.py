"""shadow_twin.calibration.recordings.recording: JointState bags in (ROS 1 and ROS 2) and out (ROS 2 MCAP / sqlite3)."""

import numpy as np
import pytest

from shadow_twin.common.errors import RecordingError
from shadow_twin.calibration.recordings.recording import (JointStateRecording, joint_state_topics, read_joint_states,
                                                          write_joint_states)

from conftest import README_JOINTS


# -- the real bag ------------------------------------------------------------------------------
def test_real_bag(real_recording, real_bag):
    rec = real_recording
    assert len(rec.frame) == 2374
    assert rec.joint_names == README_JOINTS
    assert rec.topic == '/joint_states' and rec.source == str(real_bag)
    assert rec.duration == pytest.approx(18.98, abs=0.01)
    assert np.all(np.diff(rec.times) > 0)
    assert 1 / np.median(np.diff(rec.times)) == pytest.approx(125, rel=0.05)  # about 125 Hz
    positions = rec.values(README_JOINTS)
    assert positions.shape == (2374, 24) and np.isfinite(positions).all()
    assert np.isfinite(rec.values(README_JOINTS, 'velocity')).all()
    assert np.isfinite(rec.values(README_JOINTS, 'effort')).all()
    ff3 = rec.values(['rh_FFJ3'])[:, 0]
    assert ff3[:100].max() < 0.2 and ff3.max() > 1.2  # rests open, then closes
    assert joint_state_topics(real_bag) == ['/joint_states']


# -- writing ROS 2 bags ------------------------------------------------------------------------
@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_write_and_read_back(real_recording, tmp_path, storage):
    path = write_joint_states(tmp_path / f'copy_{storage}', [real_recording], storage=storage)
    assert path == tmp_path / f'copy_{storage}' and path.is_dir()
    assert (path / 'metadata.yaml').is_file()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary directory left
    back = read_joint_states(path)
    assert back.joint_names == real_recording.joint_names
    np.testing.assert_allclose(back.times, real_recording.times, rtol=0, atol=1e-9)
    for quantity in ('position', 'velocity', 'effort'):
        np.testing.assert_allclose(back.values(README_JOINTS, quantity),
                                   real_recording.values(README_JOINTS, quantity), rtol=0, atol=1e-12)


def test_write_several_topics_and_missing_quantities(tmp_path):
    a = JointStateRecording.from_arrays([1.0, 1.5, 2.25], ['j1', 'j2'], [[0, 1], [2, 3], [4, 5]],
                                        velocities=[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], topic='/a')
    b = JointStateRecording.from_arrays([10.0, 11.0], ['k'], [[7.0], [8.0]], topic='/b')
    path = write_joint_states(tmp_path / 'two', [a, b])
    assert joint_state_topics(path) == ['/a', '/b']
    with pytest.raises(RecordingError, match="no JointState topic '/joint_states'"):
        read_joint_states(path)  # two topics, neither is /joint_states: ambiguous
    back_a, back_b = read_joint_states(path, '/a'), read_joint_states(path, '/b')
    np.testing.assert_allclose(back_a.values(['j1', 'j2']), [[0, 1], [2, 3], [4, 5]])
    np.testing.assert_allclose(back_a.values(['j2'], 'velocity'), [[0.2], [0.4], [0.6]])
    assert np.isnan(back_a.frame['effort'].to_numpy()).all()  # not written -> NaN
    np.testing.assert_allclose(back_b.times, [10.0, 11.0])
    with pytest.raises(RecordingError, match='NaN/inf effort'):
        back_b.values(['k'], 'effort')


def test_never_overwrites(tmp_path, real_recording):
    short = JointStateRecording(real_recording.frame.iloc[:10])
    path = write_joint_states(tmp_path / 'bag', [short])
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with pytest.raises(RecordingError, match='never overwritten'):
        write_joint_states(path, [short], storage='sqlite3')
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    (tmp_path / 'empty_dir').mkdir()
    with pytest.raises(RecordingError, match='exists'):
        write_joint_states(tmp_path / 'empty_dir', [short])
    with pytest.raises(RecordingError, match="unknown bag storage 'rosbag1'"):
        write_joint_states(tmp_path / 'other', [short], storage='rosbag1')
    assert not (tmp_path / 'other').exists()


# -- reading errors ----------------------------------------------------------------------------
def test_missing_and_unreadable(tmp_path):
    with pytest.raises(RecordingError, match='bag not found'):
        read_joint_states(tmp_path / 'absent.bag')
    junk = tmp_path / 'junk.bag'
    junk.write_text('not a bag at all\n')
    with pytest.raises(RecordingError, match='not a readable ROS 1 or ROS 2 bag'):
        read_joint_states(junk)


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_empty_bag(tmp_path, bag_writers, storage):
    path = bag_writers.empty(tmp_path / 'empty', storage)
    with pytest.raises(RecordingError, match='no messages'):
        read_joint_states(path)


def test_bag_without_joint_states(tmp_path, bag_writers):
    path = bag_writers.string(tmp_path / 'chatter')
    with pytest.raises(RecordingError, match=r'no sensor_msgs/JointState topic.*/chatter \(std_msgs/msg/String\)'):
        read_joint_states(path)
    with pytest.raises(RecordingError, match='no sensor_msgs/JointState topic'):
        read_joint_states(path, '/chatter')  # naming the topic does not help: wrong type


def test_duplicate_stamps(tmp_path, bag_writers):
    stamps = [100.0, 100.01, 100.01, 100.03]
    path = bag_writers.joint_states(tmp_path / 'dup', stamps, ['a'], [[0.0]] * 4,
                                    bag_times=[1.0, 2.0, 3.0, 4.0])
    with pytest.raises(RecordingError, match=r'duplicate stamp 100\.010000000 s at message 2'):
        read_joint_states(path)


def test_unsorted_stamps(tmp_path, bag_writers):
    stamps = [100.0, 100.02, 100.01, 100.03]  # header stamps go back; receive times do not
    path = bag_writers.joint_states(tmp_path / 'unsorted', stamps, ['a'], [[0.0]] * 4,
                                    bag_times=[1.0, 2.0, 3.0, 4.0], storage='sqlite3')
    with pytest.raises(RecordingError, match='unsorted stamps: message 2 .* earlier than message 1'):
        read_joint_states(path)


def test_zero_stamps_use_the_receive_time(tmp_path, bag_writers):
    path = bag_writers.joint_states(tmp_path / 'zero', [0.0, 0.0, 0.0], ['a'], [[0.0], [1.0], [2.0]],
                                    bag_times=[5.0, 5.5, 6.0])
    np.testing.assert_allclose(read_joint_states(path).times, [5.0, 5.5, 6.0])


def test_nan_samples_are_reported_by_values(tmp_path, bag_writers):
    positions = np.zeros((5, 2))
    positions[3, 1] = np.nan
    path = bag_writers.joint_states(tmp_path / 'nan', [1.0, 1.1, 1.2, 1.3, 1.4], ['a', 'b'], positions)
    rec = read_joint_states(path)  # reading works: a NaN is a sample problem
    np.testing.assert_allclose(rec.values(['a']), 0.0)
    with pytest.raises(RecordingError, match=r'1 NaN/inf position sample\(s\), first at b t=1\.300 s'):
        rec.values(['a', 'b'])


def test_requested_joint_absent(real_recording):
    with pytest.raises(RecordingError, match=r"joint\(s\) \['rh_XXJ9'\] not recorded; recorded: \['rh_FFJ1'"):
        real_recording.values(['rh_FFJ1', 'rh_XXJ9'])


def test_names_and_positions_of_different_sizes(tmp_path, bag_writers):
    path = bag_writers.joint_states(tmp_path / 'sizes', [1.0, 2.0], ['a', 'b'], [[0.0, 1.0], [0.5]])
    with pytest.raises(RecordingError, match='message 1 on /joint_states has 2 names but 1 positions'):
        read_joint_states(path)


def test_joints_missing_from_some_messages_are_nan(tmp_path, bag_writers):
    """Messages may name different joints; a joint absent from a message is NaN there."""
    path = bag_writers.joint_states(tmp_path / 'partial', [1.0, 2.0, 3.0], [['a', 'b'], ['b'], ['b', 'a']],
                                    [[0.1, 0.2], [0.3], [0.4, 0.5]])
    rec = read_joint_states(path)
    assert rec.joint_names == ['a', 'b']
    np.testing.assert_allclose(rec.values(['b']), [[0.2], [0.3], [0.4]])
    np.testing.assert_allclose(rec.frame[('position', 'a')].to_numpy(), [0.1, np.nan, 0.5])
    with pytest.raises(RecordingError, match=r'missing from some messages: a \(absent from 1 of 3 messages, '
                                             r'first at t=2\.000 s\)'):
        rec.values(['a'])


def test_joints_missing_from_some_messages_are_named(tmp_path, bag_writers):
    names = [['a', 'b'], ['a'], ['a'], ['a', 'b'], ['b']]
    positions = [[0.1, 0.2], [0.1], [0.1], [0.1, 0.2], [0.2]]
    bag = bag_writers.joint_states(tmp_path / 'partial', [1.0, 1.1, 1.2, 1.3, 1.4], names, positions)
    rec = read_joint_states(bag)
    assert rec.absent == {'a': (1, pytest.approx(1.4)), 'b': (2, pytest.approx(1.1))}
    with pytest.raises(RecordingError, match=r'joint\(s\) missing from some messages: b \(absent from 2 of 5 '
                                             r'messages, first at t=1\.100 s\)'):
        rec.values(['b'])
    with pytest.raises(RecordingError, match=r"\['c'\] not recorded"):
        rec.values(['c'])
