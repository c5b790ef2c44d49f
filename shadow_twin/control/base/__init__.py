"""The mobile base's goals: trajectories (``trajectory``), their rules (``goal_rules``) and the
tracking law that follows them (``follower``)."""
