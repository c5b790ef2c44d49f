"""Calibration, ROS-free: JointState recordings from ROS 1/2 bags (``recording``), time
alignment (``alignment``), errors (``metrics``), scoring models against recordings
(``evaluation``), search spaces over MJCF parameters (``search_space``), ask/tell
optimisers (``optimisers``), a checkpointed run (``run``), the calibration node's job
and plan (``job``, ``plan``), the written outputs (``report``; figures drawn by
``shadow_twin.plots``) and the real and simulated streams of a bag (``bag_comparison``)."""
