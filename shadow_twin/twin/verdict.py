"""The twin goal's verdict, ROS-free: how each controller goal it started ended
(:class:`ControllerResult`) and the verdict from the twin's own tolerance check and those results
(:func:`decide`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from shadow_twin.control import jtc


@dataclass(frozen=True)
class ControllerResult:
    """How a controller goal ended: its outcome (SUCCEEDED, ABORTED or CANCELED) and
    the code and message of its Result; ``gone`` when the twin gave up on the
    controller (its joint states stopped or its action server stopped answering):
    ABORTED, and the message says why."""

    outcome: jtc.GoalOutcome
    code: int = jtc.SUCCESSFUL
    message: str = ''
    gone: bool = False


#: What a reached goal reached, by default (a goal of joints).
REACHED_JOINTS = 'all joints within their goal tolerances'


def decide(check: jtc.Verdict, reached: bool, results: Mapping[str, ControllerResult | None],
           reached_text: str = REACHED_JOINTS) -> jtc.Verdict:
    """The twin goal's verdict from its own check and the controller goals' results.

    Args:
        check: ``jtc.check_path``/``check_goal`` on the actual state (real; sim in sim mode).
        reached: the twin's check has succeeded at some point after the end.
        results: {controller: ControllerResult, or None while its goal runs}; the base
            followers' runs count as controllers.
        reached_text: what the success message says was reached.
    Returns:
        A controller that is gone aborts with its message (INVALID_GOAL); a
        controller goal that ended other than succeeded aborts (with its code,
        INVALID_GOAL if it had none); a failed own check aborts; success needs
        ``reached`` and every controller succeeded; else running.
    """
    for name, result in results.items():
        if result is not None and result.gone:
            return jtc.Verdict.aborted(result.message)
        if result is not None and result.outcome is not jtc.GoalOutcome.SUCCEEDED:
            code = result.code if result.code != jtc.SUCCESSFUL else jtc.INVALID_GOAL
            text = f'{name} controller goal {result.outcome.value}'
            if result.code != jtc.SUCCESSFUL:
                text += f' ({jtc.result_name(result.code)})'
            if result.message:
                text += f': {result.message}'
            return jtc.Verdict.aborted(text, code)
    if check.outcome is jtc.GoalOutcome.ABORTED:
        return check
    if reached and all(r is not None for r in results.values()):
        return jtc.Verdict(jtc.GoalOutcome.SUCCEEDED, jtc.SUCCESSFUL,
                           f'goal reached: {reached_text}; controllers succeeded: {", ".join(results) or "none"}')
    return jtc.Verdict(jtc.GoalOutcome.RUNNING, jtc.SUCCESSFUL, check.message)
