"""Scenarios shared by the tests and ``benchmarks/`` (the tests check them once, the benchmarks repeat
them for figures): ``hand_faults`` (the hand twin under faults and load), ``cell`` (the cell's goals and
poses), ``cell_faults`` (the cell under faults), ``effort_cell`` (the external-force watch on the cell),
``base_publishers`` (other /cmd_vel publishers beside the twin)."""
