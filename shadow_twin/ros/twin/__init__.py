"""The twin node (``twin_server``): its ``FollowJointTrajectory`` server and each step a goal takes,
screen (:mod:`.screening`) -> preview (:mod:`.preview`) -> dispatch (:mod:`.dispatch`) -> follow,
with its parameters (:mod:`.parameters`), the inputs it reads (:mod:`.inputs`), a goal's state
(:mod:`.goal`), the ``~/preview`` action (:mod:`.preview_server`) and the mobile base's driver
(:mod:`.base`)."""
