"""UR's published figures of the nine arm types, shipped with the project in its own format.

``shadow_twin/model/builtin/ur_arms.yaml`` holds, per arm type of
:data:`~shadow_twin.model.ur.description.UR_TYPES`, the figures an
:class:`~shadow_twin.model.ur.description.ArmDescription` carries (SI units, radians): joint origins,
offsets, the base's mass and inertia cylinder, link masses, centres of mass, inertia tensors and
their rotations, and the joints' effort, velocity and position limits. They are facts from Universal
Robots' ROS 2 description (github.com/UniversalRobots/Universal_Robots_ROS2_Description, the
``config/<type>/`` files; BSD-3-Clause, the copyright of that repository's holders); the file's header
names the commit and carries the licence's conditions and disclaimer.

:func:`arm_description` reads a type from a description when one is given or found (a newer one
wins), else from the shipped file, so ``--arm ur10e`` works on a fresh install.
``scripts/ur_figures.py`` regenerates the file from a description checkout (:func:`figures_dict`,
:func:`write_figures`); test/core/model/test_ur_figures.py checks it against the shared copy.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.model.ur.description import (JOINTS, LINKS, UR_TYPES, ArmDescription, JointLimits, LinkInertia,
                                              check_arm_type, find_ur_description, read_arm_description)

#: The shipped figures (a file of the built-in models' folder).
FIGURES_FILE = 'ur_arms.yaml'


def shipped_figures_path() -> Path:
    """Path of the shipped figures file."""
    return Path(str(resources.files('shadow_twin.model') / 'builtin' / FIGURES_FILE))


def arm_description(arm_type: str, description: str | os.PathLike | None = None) -> ArmDescription:
    """One arm type's figures: from ``description`` or a description found
    (:func:`~shadow_twin.model.ur.description.find_ur_description`), else the shipped ones.

    Raises:
        ConfigError: an unknown type; a description given or named by the environment that holds
            none, or a malformed one; a damaged shipped file.
    """
    arm_type = check_arm_type(arm_type)
    found = find_ur_description(description)
    if found is not None:
        return read_arm_description(arm_type, found)
    return shipped_description(arm_type)


def shipped_description(arm_type: str) -> ArmDescription:
    """``arm_type``'s figures from the shipped file (ConfigError: unknown type, damaged file)."""
    arm_type = check_arm_type(arm_type)
    path = shipped_figures_path()
    try:
        data = yaml.safe_load(path.read_text(encoding='utf-8'))
        return _from_dict(arm_type, data['types'][arm_type], path)
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f'{path}: the shipped UR figures of {arm_type} cannot be read '
                          f'({type(exc).__name__}: {exc}); reinstall the package') from None


def _vec(values: Any, n: int) -> tuple[float, ...]:
    out = tuple(float(v) for v in values)
    if len(out) != n:
        raise ValueError(f'expected {n} numbers, got {len(out)}')
    return out


def _from_dict(arm_type: str, d: dict, path: Path) -> ArmDescription:
    origins = {link: (_vec(d['origins'][link]['xyz'], 3), _vec(d['origins'][link]['rpy'], 3)) for link in LINKS}
    links = {link: LinkInertia(float(v['mass']), _vec(v['com'], 3), _vec(v['tensor'], 6), _vec(v['rotation'], 3))
             for link, v in ((k, d['links'][k]) for k in LINKS)}
    limits = {}
    for joint in JOINTS:
        v = d['limits'][joint]
        position = None if v['position'] is None else _vec(v['position'], 2)
        limits[joint] = JointLimits(float(v['effort']), float(v['velocity']), position)
    base = d['base']
    return ArmDescription(arm_type, origins, {k: float(v) for k, v in d['offsets'].items()}, float(base['mass']),
                          float(base['radius']), float(base['length']), links, limits, path)


def figures_dict(desc: ArmDescription) -> dict:
    """``desc``'s figures as the shipped file's entry of its type (plain lists and floats)."""
    return {
        'origins': {link: {'xyz': list(xyz), 'rpy': list(rpy)} for link, (xyz, rpy) in desc.origins.items()},
        'offsets': dict(desc.offsets),
        'base': {'mass': desc.base_mass, 'radius': desc.base_radius, 'length': desc.base_length},
        'links': {link: {'mass': v.mass, 'com': list(v.com), 'tensor': list(v.tensor), 'rotation': list(v.rotation)}
                  for link, v in desc.links.items()},
        'limits': {joint: {'effort': v.effort, 'velocity': v.velocity,
                           'position': None if v.position is None else list(v.position)}
                   for joint, v in desc.limits.items()},
    }


def write_figures(config_dir: str | os.PathLike, source: str, licence: str, out: str | os.PathLike) -> Path:
    """Write the figures file of all :data:`UR_TYPES` read from ``config_dir`` (a description's
    ``config`` folder) to ``out`` atomically; ``source`` (the description's repository and commit)
    and ``licence`` (its full text) go into the header as comments; ``source`` is one line."""
    header = ['UR arm figures (shadow_twin/model/ur/figures.py reads this file; scripts/ur_figures.py wrote it).',
              '', 'Source: ' + source, 'Copyright: the copyright holders of that repository.', '',
              'Licence of the figures (BSD-3-Clause):', '']
    header += licence.rstrip().splitlines()
    body = {'types': {t: figures_dict(read_arm_description(t, config_dir)) for t in UR_TYPES}}
    text = '\n'.join(('# ' + line).rstrip() for line in header) + '\n'
    text += yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=120)
    return write_text_atomic(Path(out), text)
