"""Scoring a model against recordings: errors (``metrics``), placing a recording against its
trajectory (``placement``), the evaluators (``evaluation``, ``base_evaluation``, ``evaluator_set``)
and what an unstable simulation scores (``stability``)."""
