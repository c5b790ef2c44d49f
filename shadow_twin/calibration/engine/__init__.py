"""Running a calibration: the checkpointed run (``run``, ``run_settings``), rollout batches on
local threads or a Ray cluster (``executor``, ``shipped``), the screening of parameters
(``sensitivity``) and the written outputs (``report``; figures drawn by ``shadow_twin.plots``)."""
