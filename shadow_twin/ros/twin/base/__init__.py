"""The MiR base as the twin drives it: ``cmd_vel`` out, ``odom`` in (:mod:`.driver`), its settings
(:mod:`.settings`), the real-to-sim pose anchor (:mod:`.anchor`), the endpoints it talks to
(:mod:`.endpoint`) and the watch over other nodes' ``cmd_vel`` (:mod:`.cmd_vel_watch`)."""
