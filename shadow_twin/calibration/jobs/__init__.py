"""The calibrations a user or the calibration node runs: the hand's (``job``), the cell's protocol
(``protocol``, the motions of its runs ``motions``, ``cell_job``, ``cell_result``) and the node's
plan of a run (``plan``)."""
