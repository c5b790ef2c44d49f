"""A twin goal split among the controllers, ROS-free: which goal joints go to which real controller
(the first matching one) and to the sim (every joint), :func:`split_goal`; the per-controller slices of
point fields and JointTolerance lists (:func:`pick`, :func:`filter_tolerances`; duck-typed, no
message types needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from shadow_twin.control import jtc
from shadow_twin.twin.config import SIM, ControllerSpec, parse_mode


@dataclass
class GoalSplit:
    """Where each goal joint goes.

    Attributes:
        joint_names: the goal's joints, in goal order.
        groups: {controller name: indices into ``joint_names``} for every real
            controller that gets part of the goal (in config order); the sim, when
            it takes part, is under :data:`SIM` with every index.
    """

    joint_names: list[str]
    groups: dict[str, list[int]]

    def joints_of(self, controller: str) -> list[str]:
        """The goal joints sent to ``controller``."""
        return [self.joint_names[i] for i in self.groups[controller]]

    @property
    def real(self) -> list[str]:
        """Names of the real controllers taking part."""
        return [name for name in self.groups if name != SIM]


def split_goal(joint_names: Sequence[str], controllers: Sequence[ControllerSpec], mode: str) -> GoalSplit:
    """Split goal joints by controller.

    In ``real`` and ``both`` mode every joint must match a real controller
    (the first matching one in ``controllers`` takes it); ``sim`` and ``both``
    send all joints to the sim.
    Raises GoalRejected(INVALID_JOINTS) for a joint no real controller drives.
    """
    mode = parse_mode(mode)
    names = [str(j) for j in joint_names]
    groups: dict[str, list[int]] = {}
    if mode in ('real', 'both'):
        unmatched = []
        for i, joint in enumerate(names):
            owner = next((c for c in controllers if c.matches(joint)), None)
            if owner is None:
                unmatched.append(joint)
            else:
                groups.setdefault(owner.name, []).append(i)
        if unmatched:
            raise jtc.GoalRejected(jtc.INVALID_JOINTS, f'no real controller drives joint(s) {unmatched} '
                                                       f'(controllers: {[c.name for c in controllers]})')
        order = [c.name for c in controllers]
        groups = {name: groups[name] for name in order if name in groups}
    if mode in ('sim', 'both'):
        groups[SIM] = list(range(len(names)))
    return GoalSplit(names, groups)


def pick(values: Sequence, indices: Sequence[int]) -> list:
    """``values`` at ``indices`` ([] if ``values`` is empty: an absent point field)."""
    if values is None or len(values) == 0:
        return []
    return [values[i] for i in indices]


def filter_tolerances(tolerances: Iterable | None, joints: Iterable[str]) -> list:
    """The JointTolerance entries (objects or mappings with ``name``) of ``joints``."""
    keep = set(joints)
    out = []
    for tol in tolerances or ():
        name = tol.get('name') if isinstance(tol, Mapping) else getattr(tol, 'name', None)
        if name in keep:
            out.append(tol)
    return out
