"""Consumers of the monitor for other programs: a Prometheus endpoint (:mod:`.prometheus`) and a JSON-lines
stream (:mod:`.jsonl`), both reading snapshots and the runs the monitor keeps, never the UI.

Nothing is imported here, so a stream alone does not load ``prometheus_client``.
"""
