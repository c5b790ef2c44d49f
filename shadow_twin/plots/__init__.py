"""Views, ROS-free: real-vs-sim PNGs from bags (``bag_plots``), the rqt perspective files
(``perspective``) and the Qt window/dock layout bytes they store (``qt_layout``)."""
