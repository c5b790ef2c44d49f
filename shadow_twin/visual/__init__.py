"""Sim and real seen in 3D, ROS-free (issue 38): what of a MuJoCo model is drawn (:mod:`.geometry`: each
visible geom as primitives or a mesh file, in its body's frame), the bodies' frames as a tree for TF
(:mod:`.frames`), a robot's configuration from joint states and odometry (:mod:`.configuration`) and the
sim-real error of each link as a colour (:mod:`.colours`). The bridge, the monitor, the browser view and
the videos draw from these."""
