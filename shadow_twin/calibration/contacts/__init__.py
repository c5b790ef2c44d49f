"""Contact calibration (issue 37): an object's and its contacts' parameters (friction, solref, solimp,
mass) fitted to tilt runs recorded on the robot: ``protocol`` (the runs), ``tilt`` (one run in the
bridge's live simulation, and its record), ``evaluator`` (parameter sets replayed and scored for the
calibration engine), ``fit`` (screen, fit with the default optimiser, check the hold-out, write the
calibrated scene)."""
