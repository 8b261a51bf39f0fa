"""Run one orphan sweep (``deep``: engine/gc/deep.py, or ``today``: engine/gc/orphans.py)
in a fresh process and report its memory and counts (JSON on stdout).

``tests/engine/gc/test_gc_deep.py`` runs this as a subprocess so the peak it
measures is the sweep's own: ``baseline_kib`` is the RSS with the store open and
the ownership read, ``peak_kib`` the peak RSS while the sweep ran. A dry run
with no grace: nothing is deleted, every key is judged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.gc.deep import deep_sweep  # noqa: E402
from engine.gc.orphans import sweep_orphans  # noqa: E402
from engine.gc.ownership import ownership  # noqa: E402
from tenants.store import TableStore  # noqa: E402
from tests.helpers.memory_job import start_measuring, status_kib  # noqa: E402


def main() -> None:
    catalog_uri, warehouse, which = sys.argv[1:4]
    store = TableStore.open(catalog_uri, warehouse)
    owner = ownership(store.catalog, store.objects)
    sweep = deep_sweep if which == "deep" else sweep_orphans
    baseline = start_measuring()
    report = sweep(store.catalog, store.objects, grace_us=0, dry_run=True, owner=owner)
    peak = status_kib("VmHWM")
    store.close()
    print(
        json.dumps(
            {
                "baseline_kib": baseline,
                "peak_kib": peak,
                "listed": report.listed,
                "known": report.known,
                "foreign": report.foreign,
                "orphans": len(report.orphans),
            }
        )
    )


if __name__ == "__main__":
    main()
