"""Views, ROS-free: every figure of the project, drawn with matplotlib from plain data (``figures``:
PNG bytes; ``bag_plots``: real vs sim PNGs of a bag; ``report_figures``: a calibration's convergence
and joints; ``sensitivity``: tornado chart; ``cell_runs``: one figure per protocol run;
``demo_figures``: the demos'), and the rqt perspective files (``perspective``) with the Qt
window/dock layout bytes they store (``qt_layout``). Imports nothing from ``calibration``."""
