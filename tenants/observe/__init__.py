"""Observing a job from outside: structured events, one per step (events.py).

A package of its own so that tenants/ keeps a small top level
(tests/test_import_graph.py); it imports only tenants.redaction.
"""
