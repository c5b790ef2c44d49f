"""The pass/fail lines the ROS benchmarks print (``faults.py``, ``base_publishers.py``): one
implementation of "print the figure, PASS or FAIL, remember the misses"."""

from __future__ import annotations


class Checks:
    """Collects pass/fail lines: ``check(ok, line)`` prints ``line PASS`` or ``line FAIL`` (flushed)
    and keeps the failed lines in :attr:`failed`."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def __call__(self, ok: bool, line: str) -> None:
        print(f'{line} {"PASS" if ok else "FAIL"}', flush=True)
        if not ok:
            self.failed.append(line)
