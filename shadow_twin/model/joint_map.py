"""Map between the joint names on ``/joint_states`` (ROS) and MJCF joint names.

YAML form (identity for joints not listed)::

    joint_map:
      rh_FFJ1: ffj1        # ROS name: MJCF name
"""

from __future__ import annotations

from pathlib import Path

import yaml

from shadow_twin.common.errors import ConfigError


class JointNameMap:
    """Bidirectional ROS <-> MJCF joint-name map; identity where not given.

    Args:
        ros_to_mjcf: {ROS name: MJCF name}. Raises ConfigError if two ROS names
            map to the same MJCF joint.
    """

    def __init__(self, ros_to_mjcf: dict[str, str] | None = None) -> None:
        self._to_mjcf = dict(ros_to_mjcf or {})
        self._to_ros = {}
        for ros, mjcf in self._to_mjcf.items():
            if mjcf in self._to_ros:
                raise ConfigError(f'joint map sends both {self._to_ros[mjcf]!r} and {ros!r} to {mjcf!r}')
            self._to_ros[mjcf] = ros

    @classmethod
    def from_yaml(cls, path: str | Path | None) -> 'JointNameMap':
        """Load ``joint_map:`` from a YAML file; None gives the identity map."""
        if path is None:
            return cls()
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f'joint map file not found: {path}')
        data = yaml.safe_load(path.read_text()) or {}
        mapping = data.get('joint_map', data)
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise ConfigError(f'{path}: joint_map must map ROS names to MJCF names')
        return cls(mapping)

    def to_mjcf(self, ros_name: str) -> str:
        """MJCF joint name for a ROS joint name."""
        return self._to_mjcf.get(ros_name, ros_name)

    def to_ros(self, mjcf_name: str) -> str:
        """ROS joint name for an MJCF joint name."""
        return self._to_ros.get(mjcf_name, mjcf_name)

    def as_dict(self) -> dict[str, str]:
        """The explicit (non-identity) entries, {ROS: MJCF}."""
        return dict(self._to_mjcf)
