"""Synthetic recordings of the cell's calibration protocol, with a known answer.

The cell model with some parameters set to known "true" values plays the real robot: each
protocol run is simulated offline (the arm following the run's trajectory, the base driven by
the run's velocity profile as open-loop ``cmd_vel`` at 50 Hz, after the protocol's lead-in)
and written as the calibration node writes a run: the arm's joint states at 125 Hz (the UR's
rate) on ``/joint_states``, the commanded arm trajectory stamped with its start, and for base
runs ``TwistStamped`` commands on ``/cmd_vel`` and odometry at 50 Hz on ``/odom``. A cell
calibration of those parameters must find them again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from shadow_twin.calibration.scoring.base_evaluation import BaseObjectiveSettings
from shadow_twin.calibration.recordings.base_recording import (ODOMETRY, TWIST_STAMPED, BaseRecording,
                                                               base_recording_messages)
from shadow_twin.calibration.jobs.protocol import CellProtocol
from shadow_twin.calibration.recordings.recording import (JOINT_STATE, TRAJECTORY, JointStateRecording,
                                                          joint_state_messages, trajectory_cdr, write_serialized_bag)
from shadow_twin.control.controller import SimController
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.mobile_base import TwistCommands
from shadow_twin.simulation.offline import TrajectorySimulator

START = 100.0          # s, each run's start on the recording clock
PRE_ROLL = 0.2         # s of joint states recorded before it
TAIL = 1.5             # s recorded after the run's end
ARM_EVERY = 4          # 2 ms steps -> 125 Hz joint states
ODOM_EVERY = 10        # -> 50 Hz odometry
COMMAND_PERIOD = 0.02  # s, 50 Hz cmd_vel


def write_protocol_bags(protocol: CellProtocol, twin: TwinModel, controller: SimController,
                        truth: Mapping[ParameterTarget, float], out_dir: Path) -> dict[str, Path]:
    """Simulate every run of ``protocol`` on ``twin`` with ``truth`` applied; write one bag per
    run into ``out_dir``; returns {run: bag}."""
    bags = {}
    rest = protocol.rest_pose
    for run in protocol.runs:
        goal = run.goal(rest)
        duration = goal.duration + TAIL
        commands = None
        if len(goal.base_times):
            times = np.arange(0.0, run.base.duration + 0.3, COMMAND_PERIOD)
            commands = TwistCommands(times, run.base.twist(times))
        sim = TrajectorySimulator(twin.model, controller, goal.arm, duration, initial_positions=rest,
                                  base_commands=commands,
                                  settle_time=BaseObjectiveSettings().settle_time if commands else 0.0,
                                  base_lead_in=protocol.lead_in_commands() if commands else None,
                                  hold_at_rest_command=commands is not None)
        model = sim.model_copies(1)[0]
        apply_parameters(model, dict(truth))
        if commands is not None:
            positions, poses = sim.run_base([model])
            positions, poses = positions[0], poses[0]
        else:
            positions = sim.run([model])[0]
        columns = [controller.joint_names.index(j) for j in rest]
        arm = positions[ARM_EVERY - 1::ARM_EVERY][:, columns]
        arm_times = START + sim.times[ARM_EVERY - 1::ARM_EVERY]
        pre = START - PRE_ROLL + np.arange(int(PRE_ROLL * 125)) / 125.0
        recording = JointStateRecording.from_arrays(np.concatenate([pre, arm_times]), list(rest),
                                                    np.vstack([np.tile(sim.start_positions[columns], (len(pre), 1)),
                                                               arm]), source='synthetic')
        messages = joint_state_messages(recording)
        messages.append(('/calibration_node/commanded_trajectory', int(START * 1e9) - 1000,
                         trajectory_cdr(goal.arm, START)))
        topics = {'/joint_states': JOINT_STATE, '/calibration_node/commanded_trajectory': TRAJECTORY}
        if commands is not None:
            start_pose = sim.initial_base_pose
            pose_times = np.concatenate([[START], START + sim.times[ODOM_EVERY - 1::ODOM_EVERY]])
            path = np.vstack([start_pose, poses[ODOM_EVERY - 1::ODOM_EVERY]])
            base = BaseRecording(START + commands.times, commands.twists, pose_times, path, '/odom', 'synthetic')
            messages += base_recording_messages(base)
            topics.update({'/cmd_vel': TWIST_STAMPED, '/odom': ODOMETRY})
        bags[run.name] = write_serialized_bag(out_dir / run.name, topics, sorted(messages, key=lambda m: m[1]))
    return bags
