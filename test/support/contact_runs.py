"""What the contact calibration's tests share: the shipped contact protocol shortened, and the bags of its runs
made by the sim with a slipperier can (the command's tests and the calibration node's)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SCENE_FILE = REPO / 'config' / 'scene_hand.yaml'
#: The can's sliding friction in the bags (the scene's: 1.0).
BAGS_FRICTION = 0.5


def short_protocol(path: Path) -> Path:
    """Write the shipped protocol, shortened, to ``path``: one grip run (4 s at 15 deg/s), a hold-out (5 s at
    12 deg/s) in the hand scene, the can's friction fitted (its ``fit``); the onset at 1 mm (the grip's creep: the
    sim's own runs, without a capture's noise); the efforts compared as recorded (the squeeze the grip holds
    repeats in the sim's own runs, and shows the friction in a short fit)."""
    data = yaml.safe_load((REPO / 'config' / 'calibration' / 'contact_protocol.yaml').read_text())
    data['contact_protocol'].update(scene=str(SCENE_FILE), effort_change=False, onset_mm=1.0, fit=['can_friction'],
                                    runs=[{'name': 'grip', 'grip': True, 'rate': 15.0, 'duration': 4.0}],
                                    holdout=[{'name': 'grip_holdout', 'grip': True, 'rate': 12.0, 'duration': 5.0}])
    path.write_text(yaml.safe_dump(data))
    return path


def slippery_bags(protocol_file: Path, folder: Path) -> dict[str, Path]:
    """{run: bag} in ``folder``: every run of the protocol at ``protocol_file`` made by the sim with the can's
    friction :data:`BAGS_FRICTION`."""
    from shadow_twin.calibration.contacts.bags import write_tilt_run
    from shadow_twin.calibration.contacts.protocol import ContactProtocol
    from shadow_twin.calibration.contacts.tilt import record_runs
    from shadow_twin.model.scene import SceneConfig
    from shadow_twin.simulation.live.simulation import LiveSimulation
    protocol = ContactProtocol.from_yaml(protocol_file)
    scene = SceneConfig.from_yaml(SCENE_FILE)
    slippery = SceneConfig(tuple(o.scaled(friction=BAGS_FRICTION) if o.name == 'can' else o for o in scene.objects))
    runs = (*protocol.runs, *protocol.holdout)
    return {run.name: write_tilt_run(folder / run.name, record, protocol, run)
            for run, record in zip(runs, record_runs(LiveSimulation(None, scene=slippery), protocol, runs))}
