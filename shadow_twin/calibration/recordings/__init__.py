"""Recordings a calibration compares with: JointState recordings from ROS 1/2 bags (``recording``,
``bag_reader``), their time alignment (``alignment``), the base's runs (``base_recording``,
``frame``: the motion-capture floor frame) and a bag's real and sim streams (``bag_comparison``)."""
