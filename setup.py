"""ament_python package shadow_twin: MuJoCo digital twin of a Shadow Hand E / UR5 / MiR250 cell."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = 'shadow_twin'


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries installing ``folder`` (recursively) into share/shadow_twin."""
    entries: dict[str, list[str]] = {}
    for path in glob(f'{folder}/**/*', recursive=True):
        if not path.endswith('/') and '.' in path.rsplit('/', 1)[-1]:
            entries.setdefault(f'share/{PACKAGE}/' + path.rsplit('/', 1)[0], []).append(path)
    return sorted(entries.items())


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(include=[PACKAGE, f'{PACKAGE}.*', 'mujoco_bridge', 'calibration_node']),
    package_data={f'{PACKAGE}.model': ['builtin/*.xml', 'builtin/*.yaml']},
    data_files=[
        ('share/ament_index/resource_index/packages', [f'resource/{PACKAGE}']),
        (f'share/{PACKAGE}', ['package.xml']),
        *tree('launch'),
        *tree('config'),
        (f'share/{PACKAGE}/models', glob(f'{PACKAGE}/model/builtin/*.xml')),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='shadow_twin developers',
    maintainer_email='shadow-twin@example.org',
    description='Live MuJoCo digital twin of a Shadow Hand E on a UR5 on a MiR250, with calibration',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'shadow-twin = shadow_twin.cli.main:main',
            'mujoco_bridge = mujoco_bridge.main:main',
            'twin_server = shadow_twin.ros.twin.server:main',
            'twin_monitor = shadow_twin.ros.monitor.node:main',
            'calibration_node = calibration_node.node:main',
        ],
    },
)
