"""Scoring a model against recordings: errors (``metrics``), the evaluators (``evaluation``,
``base_evaluation``, ``evaluator_set``) and what an unstable simulation scores (``stability``)."""
