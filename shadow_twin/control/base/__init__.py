"""The mobile base's goals: trajectories and reading them from goals (``trajectory``), the rules a
goal must meet (``goal_rules``), the tracking law (``tracking``) and the follower that runs it
against the goal's tolerances (``follower``)."""
