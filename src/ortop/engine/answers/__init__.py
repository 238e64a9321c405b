"""The commands that answer a question and stop: capacity under an SLO (:mod:`.capacity`, the search in
:mod:`.capacity_search`) and its certification (:mod:`.certify`), the tuner (:mod:`.space`, :mod:`.trials`,
:mod:`.tuner`, its racer :mod:`.racer`, :mod:`.tunerun`), a model's variants (:mod:`.variants`) and per-operator
time (:mod:`.ops`). They use the bench (:mod:`ortop.engine.bench`) and never the live session."""
