"""What ``spacy train`` uses from spacy-elmo.

- ``log``: ``spacy-elmo.TrainingLog.v1``, spaCy's console table plus a JSONL
  record of every evaluation, and ``spacy-elmo.TrainingLog.v2``, the log of a
  resumed stretch of a killed run (appends with offsets, keeps the optimizer's
  state and the earlier best evaluation).
- ``optimizer_state``: ``spacy-elmo.StatefulOptimizer.v1`` and the optimizer
  state a killed run resumes from, saved by parameter names that are the same
  in every process.

Both are registered through setup.py's entry points (``spacy_loggers``,
``thinc_optimizers``), so a config names them without importing anything."""
