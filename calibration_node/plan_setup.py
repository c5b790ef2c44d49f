"""A new calibration plan's fields from the ``calibration_node``'s parameters, validated:
:class:`PlanSetup`, a part of :class:`calibration_node.node.CalibrationNode`."""

from __future__ import annotations

from pathlib import Path

from rclpy.exceptions import InvalidTopicNameException
from rclpy.validate_topic_name import validate_topic_name

from calibration_node.contact_protocol import contact_plan_fields, contact_protocol_file
from calibration_node.parameters import BASE_TOPICS
from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.calibration.jobs.plan import LIVE, OFFLINE, PlanEntry, holdout_names, protocol_entries
from shadow_twin.calibration.jobs.protocol import CellProtocol
from shadow_twin.calibration.engine.run import CalibrationSettings
from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.common.paths import config_path, resolve_share_url
from shadow_twin.control.trajectory import load_waypoint_yaml
from shadow_twin.model.mjcf import PACKAGE_MODELS_URL, resolve_model_path


def model_file(text: str) -> Path:
    """The MJCF file a ``model_path`` names, resolved as the bridge resolves it: '' = the built-in
    Shadow Hand E, ``package://shadow_twin/models/<file>`` = that built-in model
    (:func:`~shadow_twin.model.mjcf.resolve_model_path`, as ``TwinModel`` does), any other
    ``package://shadow_twin/<path>`` = that file of the share directory, else the path (``~`` expanded).
    The URL is never passed through ``Path`` first (which folds ``//`` and loses the scheme).
    Raises ConfigError for a ``package://`` URL naming no built-in model."""
    text = str(text or '').strip()
    try:
        if not text or text.startswith(PACKAGE_MODELS_URL):
            return resolve_model_path(text)
    except ModelError as exc:
        raise ConfigError(f'model_path {exc}') from None
    return resolve_share_url(text).expanduser()


class PlanSetup:
    """The plan fields, optimiser settings, protocol settings and base model of a new run, read from
    the parameters (:data:`calibration_node.parameters.SPECS`) of the node it is mixed into, which
    provides ``settings`` (its current :class:`~calibration_node.parameters.CalibrationNodeSettings`), ``bridge`` (a
    :class:`~calibration_node.bridge_link.BridgeLink`) and ``get_logger()``."""

    def _plan_fields(self) -> dict:
        """The fields of a new plan, from the parameters and the bridge's model."""
        s = self.settings
        protocol = self._protocol_settings()
        alignment = {'settle_time': s.settle_time, 'max_delay': s.max_delay, 'stamped_max_delay': s.stamped_max_delay}
        bags = [b.strip() for b in s.bag.split(',') if b.strip()]
        missing = [b for b in bags if not Path(b).exists()]
        if missing:
            raise ConfigError(f'bag(s) not found: {missing}')
        common = dict(mode=OFFLINE if bags else LIVE, settings=self._optimiser_settings(), alignment=alignment,
                      real_topic=s.real_joint_states_topic, sim_topic=s.sim_joint_states_topic,
                      cluster=s.cluster.strip(), reduce=s.reduce)
        if protocol['contacts'] is not None:         # the hand's model is model_path's, not the bridge's (the cell)
            return {**common, **contact_plan_fields(s, protocol['contacts'], bags)}
        model_path, gains_file = self._base_model(cell=protocol['protocol'] is not None)
        common.update(model_path=model_path, gains_file=gains_file)
        if protocol['protocol'] is not None:
            return {**common, **self._protocol_fields(protocol, bags)}
        space = Path(s.space_file or config_path('calibration', 'finger_dynamics.yaml'))
        if not space.is_file():
            raise ConfigError(f'space_file {space} does not exist')
        if bags:
            names = [Path(b).name.split('.')[0] for b in bags]
            held = holdout_names(names, s.holdout)
            trajectory = s.bag_trajectory or None
            entries = [PlanEntry(n, str(Path(b).resolve()), trajectory, n in held) for n, b in zip(names, bags)]
        else:
            file = Path(s.trajectories_file or config_path('trajectories', 'calibration.yaml')).resolve()
            names = list(s.trajectories)
            if not names:
                raise ConfigError('no trajectories to record (parameter trajectories is empty)')
            for name in names:
                load_waypoint_yaml(file, name)   # TrajectoryError naming it
            held = holdout_names(names, s.holdout)
            entries = [PlanEntry(n, f'bags/{n}', f'{file}:{n}', n in held) for n in names]
        return dict(common, space_file=str(space.resolve()), objective_joints=list(s.objective_joints),
                    entries=entries)

    def _protocol_fields(self, protocol: dict, bags: list[str]) -> dict:
        """The protocol fields of a new plan: its runs (matched to ``bags`` offline), the base topics.
        Raises ConfigError for a hand-calibration parameter that does not apply, or unmatched bags."""
        s = self.settings
        if s.holdout.strip() not in ('auto', ''):
            raise ConfigError(f'holdout {s.holdout!r} does not apply to a protocol: its validation runs are '
                              'held out')
        if s.bag_trajectory:
            raise ConfigError('bag_trajectory does not apply to a protocol: each run\'s arm trajectory comes '
                              'from the protocol')
        topics = protocol['topics']
        return dict(space_file='', objective_joints=list(protocol['cell'].rest_pose),
                    entries=protocol_entries(protocol['cell'], bags or None), protocol=str(protocol['protocol']),
                    base_cmd_vel_topic=topics['base_cmd_vel_topic'],
                    base_odom_topic=topics['base_odom_topic'] or None,
                    base_pose_topic=topics['base_pose_topic'] or None, sim_odom_topic=topics['sim_odom_topic'],
                    frame_file=str(protocol['frame_file']) if protocol['frame_file'] else None)

    def _protocol_settings(self) -> dict:
        """The protocol parameters, validated: {'protocol': absolute path of the cell protocol YAML or
        None (the hand's calibration, or the contact protocol), 'cell': its CellProtocol or None, 'topics':
        {parameter: topic ('' = none)}, 'frame_file': absolute path or None, 'contacts': absolute path of a
        contact protocol YAML or None}. Raises ConfigError naming the problem."""
        s = self.settings
        value = s.protocol.strip()
        path, cell = None, None
        contacts = contact_protocol_file(value)
        if contacts is not None:
            ContactProtocol.from_yaml(contacts)       # ConfigError naming the file and the problem
            value = ''
        if value:
            path = (config_path('calibration', 'cell_protocol.yaml') if value == 'cell'
                    else resolve_share_url(value).expanduser()).resolve()
            if not path.is_file():
                raise ConfigError(f"protocol {value!r}: {path} does not exist ('' = the hand's calibration, "
                                  "'cell' = the shipped protocol, else a protocol YAML)")
            cell = CellProtocol.from_yaml(path)        # ConfigError naming the file and the problem
        topics = {name: s.value(name).strip() for name in BASE_TOPICS}
        used = {'real_joint_states_topic': s.real_joint_states_topic,
                'sim_joint_states_topic': s.sim_joint_states_topic, **topics}
        seen: dict[str, str] = {}
        for name, topic in used.items():
            if not topic:
                continue
            try:
                validate_topic_name(topic)
            except InvalidTopicNameException as exc:
                raise ConfigError(f'{name} {topic!r} is not a valid topic name ({" ".join(str(exc).split())})') \
                    from None
            if topic in seen and path is not None:
                raise ConfigError(f'{seen[topic]} and {name} are both {topic}; a protocol run records each apart')
            seen.setdefault(topic, name)
        if path is not None:
            for name in ('base_cmd_vel_topic', 'sim_odom_topic'):
                if not topics[name]:
                    raise ConfigError(f'{name} is empty; a protocol run records it')
        frame_file = None
        if s.frame_file:
            frame_file = Path(s.frame_file).expanduser().resolve()
            if not topics['base_pose_topic']:
                raise ConfigError(f'frame_file {frame_file} is set but base_pose_topic is empty: the floor frame '
                                  'applies only to a motion-capture pose topic')
            try:
                FrameCalibration.read(frame_file)
            except ConfigError as exc:
                raise ConfigError(f'frame_file {frame_file}: {exc}') from None
        return {'protocol': path, 'cell': cell, 'topics': topics, 'frame_file': frame_file, 'contacts': contacts}

    def _optimiser_settings(self) -> dict:
        """Optimiser settings from the parameters, as a plan holds them (validated: ConfigError names the
        problem)."""
        s = self.settings
        settings = {'optimizer': s.optimizer, 'budget': s.budget, 'workers': s.workers, 'seed': s.seed,
                    'acq_func': s.acq_func, 'log_objective': s.log_objective}
        CalibrationSettings(**settings)
        return settings

    def _base_model(self, cell: bool = False) -> tuple[str, str]:
        """(model_path, gains_file) the bridge runs, else this node's parameters (absolute paths;
        ``package://shadow_twin/...`` URLs resolved). Default gains: the hand's, or with ``cell``
        config/controllers/cell.yaml. Raises ConfigError if a file does not exist, or, for the cell,
        when there is no model (it has no built-in MJCF)."""
        model, gains = self.settings.model_path, self.settings.gains_file
        from_bridge = self.bridge.model_and_gains()
        if from_bridge is not None:
            model, gains = from_bridge
        else:
            self.get_logger().warning(f'bridge {self.bridge.bridge} not found; calibrating '
                                      f'{model or "the built-in model"}')
        if cell and not model:
            where = (f'bridge {self.bridge.bridge} runs the built-in hand' if from_bridge is not None else
                     f'no bridge {self.bridge.bridge} answered and model_path is empty')
            raise ConfigError(f'a protocol calibrates the cell, which has no built-in MJCF: {where}; set model_path '
                              'to a cell MJCF (shadow-twin model --cell --out cell.xml)')
        model = model_file(model)       # '' = the built-in hand
        gains = resolve_share_url(gains) if gains else config_path('controllers',
                                                                    'cell.yaml' if cell else 'shadow_hand_e.yaml')
        for what, path in (('model', model), ('gains file', gains)):
            if not path.is_file():
                raise ConfigError(f'the {what} {path} does not exist')
        return str(model.resolve()), str(gains.resolve())
