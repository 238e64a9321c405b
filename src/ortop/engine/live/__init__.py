"""The live session: the monitor that keeps a worker running (:mod:`.monitor`, its state in :mod:`.monitor_state`),
what it reads from the worker's rows (:mod:`.readout`, rings in :mod:`.store`), the snapshot the TUI draws
(:mod:`.snapshot`, :mod:`.view`), its events and findings (:mod:`.events`, :mod:`.verdicts`, :mod:`.memory`), the
live view's verification (:mod:`.verify`), and the headless runner that measures without a screen
(:mod:`.headless`). It uses the bench (:mod:`ortop.engine.bench`) and never the answering commands."""
