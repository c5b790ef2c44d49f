"""Regenerate shadow_twin/model/builtin/ur_arms.yaml (UR's figures of the nine arm types) from a
Universal_Robots_ROS2_Description checkout.

Usage: .venv/bin/python scripts/ur_figures.py DESCRIPTION [--out FILE]

DESCRIPTION: the checkout (its ``LICENSE`` and, if there, ``SOURCE.txt`` naming the commit go into
the file's header) or its ``config`` folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.ur.description import find_ur_description
from shadow_twin.model.ur.figures import shipped_figures_path, write_figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('description', type=Path)
    parser.add_argument('--out', type=Path, default=None, help='default: the shipped file')
    args = parser.parse_args(argv)
    try:
        config = find_ur_description(args.description)
        root = config.parent if config.name == 'config' else config
        licence = (root / 'LICENSE').read_text(encoding='utf-8')
        source_file = root / 'SOURCE.txt'
        # SOURCE.txt's first sentence names the repository and commit
        source = source_file.read_text(encoding='utf-8').split(', files')[0] if source_file.is_file() else str(root)
        source = ' '.join(source.split()) + ', config/<type>/{default_kinematics,joint_limits,physical_parameters}.yaml'
        out = write_figures(config, source, licence, args.out or shipped_figures_path())
    except (ConfigError, OSError) as exc:
        print(f'ur_figures: {exc}', file=sys.stderr)
        return 2
    print(f'wrote {out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
