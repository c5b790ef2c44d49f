"""The calibrations a user or the calibration node runs: the hand's (``job``), the cell's protocol
(``protocol``, ``cell_job``, ``cell_result``) and the node's plan of a run (``plan``)."""
