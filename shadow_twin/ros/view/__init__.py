"""The browser view's node (issue 38): ROS messages into :mod:`shadow_twin.visual.browser`'s page
(:mod:`.node`), their conversion (:mod:`.messages`) and its parameters (:mod:`.parameters`)."""
