"""``make demo``: the whole story, through the ``rewind`` CLI, on real S3.

An embedded moto S3 server and a fresh catalog in ``.rewind-demo/``; a
tenant ``acme`` with three tables (one with a composite key); a load, a
manual and a scheduled snapshot; batches of inserts, updates and deletes; a
compaction (so objects straddle the snapshot); a time-travel read; then an
accidental mass delete, the restore plan, the physical restore with full
verification, and the data back as it was. Every table is compared with an
in-memory model of what was written, so the demo proves something instead of
only printing it, and exits non-zero if it does not hold.

The demo is a list of small step functions over one :class:`Demo`, so later
work (snapshots, restore) adds steps rather than rewriting it.

The S3 server lives in memory and stops with the demo, so at the end its
warehouse is copied to ``.rewind-demo/warehouse`` beside the catalog: with
``REWIND_HOME=.rewind-demo`` every ``rewind`` command sees what the demo left
(its tenant, snapshots, restores and retired tenant) on a ``file://``
warehouse. Each run starts that directory afresh (``REWIND_DEMO_HOME`` moves
it).
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.cli import render
from engine.cli.app import main as rewind_main
from engine.restore.history import commit_history
from tenants.errors import MissingDependency
from tenants.objectstore import open_object_store
from tenants.objectstore.embedded import EmbeddedS3, embedded_s3
from tenants.spark.credentials import environment_settings
from tenants.store import TableStore

TENANT = "acme"
BUCKET = "rewind-demo"
HOME = Path(".rewind-demo")  # under the clone (make demo runs at its root); REWIND_HOME for later
KEPT = "made-by-make-demo"  # a file in HOME: the demo may start it afresh
SNAPSHOT = "after_load"
CITIES = ["Lisbon", "Oslo", "Osaka", "Lima", "Austin", "Accra", "Perth"]
ITEMS = ["widget", "gadget", "sprocket", "gizmo", "doohickey"]

Row = dict[str, Any]
Key = tuple[Any, ...]
# table -> (key columns, columns in order)
TABLES: dict[str, tuple[list[str], list[str]]] = {
    "sales.customers": (["id"], ["id:int64", "name:string", "city:string"]),
    "sales.orders": (
        ["customer_id", "order_no"],
        [
            "customer_id:int64",
            "order_no:int32",
            "item:string",
            "qty:int32",
            "amount:double",
            "status:string",
        ],
    ),
    "inventory.stock": (["sku"], ["sku:string", "on_hand:int64", "price:double"]),
}


class DemoFailed(Exception):
    """A command failed or the store disagreed with the model."""


@dataclass
class Demo:
    """What the steps share: the console, files, an API handle, and the model."""

    console: Console
    workdir: Path
    store: TableStore
    model: dict[str, dict[Key, Row]] = field(default_factory=lambda: {t: {} for t in TABLES})
    marks: dict[str, tuple[int, dict[str, dict[Key, Row]]]] = field(default_factory=dict)
    scheduled: str = ""

    def rewind(self, *args: str | Path) -> None:
        """Run one CLI command in-process, echoing it as a user would type it."""
        shown = [a.name if isinstance(a, Path) else a for a in args]
        self.console.print(f"[bold cyan]$ rewind {' '.join(shown)}[/]", highlight=False)
        try:
            rewind_main([str(a) for a in args])
        except SystemExit as e:
            if e.code not in (0, None):
                raise DemoFailed(f"`rewind {' '.join(shown)}` exited with {e.code}") from None

    def upsert(self, table: str, rows: list[Row], fmt: str = "parquet") -> None:
        """Write ``rows`` to a file, ``rewind load`` it, and apply it to the model."""
        path = self._file(table, "rows", fmt, rows)
        self.rewind("load", TENANT, table, path)
        keys = TABLES[table][0]
        for row in rows:
            self.model[table][tuple(row[k] for k in keys)] = row

    def delete(self, table: str, keys: list[Key]) -> None:
        names = TABLES[table][0]
        path = self._file(table, "keys", "csv", [dict(zip(names, k, strict=True)) for k in keys])
        self.rewind("delete", TENANT, table, "--keys", path)
        for key in keys:
            self.model[table].pop(key, None)

    def mark(self, name: str, ts: int) -> None:
        self.marks[name] = (ts, copy.deepcopy(self.model))

    def _file(self, table: str, what: str, fmt: str, rows: list[Row]) -> Path:
        path = (
            self.workdir
            / f"{table.replace('.', '-')}-{what}-{len(list(self.workdir.iterdir()))}.{fmt}"
        )
        data = pa.Table.from_pylist(rows)
        if fmt == "csv":
            pa_csv.write_csv(data, path)
        else:
            pq.write_table(data, path)
        return path


# deterministic data


def customer(i: int, moved: int = 0) -> Row:
    return {"id": i, "name": f"customer-{i:04d}", "city": CITIES[(i * 3 + moved) % len(CITIES)]}


def order(g: int, status: str = "new", extra: float = 0.0) -> Row:
    """Order number ``g`` overall: customer ``g % 200``, that customer's order ``g // 200 + 1``."""
    c, n = g % 200, g // 200 + 1
    return {
        "customer_id": c,
        "order_no": n,
        "item": ITEMS[(c * 31 + n) % len(ITEMS)],
        "qty": 1 + (c + n) % 9,
        "amount": round((c * 97 + n * 13) % 10_000 / 100 + extra, 2),
        "status": status,
    }


def order_key(g: int) -> Key:
    return (g % 200, g // 200 + 1)


def stock(i: int, on_hand: int | None = None) -> Row:
    return {
        "sku": f"SKU-{i:05d}",
        "on_hand": (i * 37) % 500 if on_hand is None else on_hand,
        "price": round(1 + (i * 7919) % 9_000 / 100, 2),
    }


# steps


def step_tenant_and_tables(demo: Demo) -> None:
    """A tenant and three tables (orders has a composite key)."""
    demo.rewind("tenant", "create", TENANT)
    for table, (keys, columns) in TABLES.items():
        args: list[str] = []
        for column in columns:
            args += ["--column", column]
        for key in keys:
            args += ["--key", key]
        demo.rewind("table", "create", TENANT, table, *args)
    demo.rewind("table", "list", TENANT)


def step_initial_load(demo: Demo) -> None:
    """800 customers from CSV, 2,000 orders in four Parquet batches, 300 SKUs."""
    demo.upsert("sales.customers", [customer(i) for i in range(800)], fmt="csv")
    for batch in range(4):
        demo.upsert("sales.orders", [order(g) for g in range(batch * 500, (batch + 1) * 500)])
    demo.upsert("inventory.stock", [stock(i) for i in range(300)])


def step_scheduled_snapshot(demo: Demo) -> None:
    """A manual snapshot, a schedule (every 5 s here; daily in real life) and a tick once due."""
    demo.rewind("snapshot", "create", TENANT, SNAPSHOT)
    demo.mark(SNAPSHOT, demo.store.snapshot(TENANT, SNAPSHOT).ts)
    demo.rewind(
        "snapshot", "schedule", TENANT, "--first", "00:00", "--every", "5s", "--keep-last", "3"
    )
    period = 5.0
    time.sleep(period - time.time() % period + 0.2)  # past the next due time
    demo.rewind("snapshot", "tick", TENANT)
    scheduled = [s for s in demo.store.snapshots(TENANT) if s.kind == "scheduled"]
    if not scheduled:
        raise DemoFailed("the tick created no scheduled snapshot")
    demo.scheduled = scheduled[-1].name
    demo.mark(demo.scheduled, scheduled[-1].ts)
    demo.rewind("snapshot", "list", TENANT)


def step_changes(demo: Demo) -> None:
    """Updates, deletes and more inserts, each its own commit, after the snapshot."""
    demo.upsert("sales.orders", [order(g, "shipped", 1.0) for g in range(0, 2000, 5)])
    demo.delete("sales.orders", [order_key(g) for g in range(2000) if g % 7 == 3])
    demo.upsert("sales.orders", [order(g) for g in range(2000, 2300)])
    demo.upsert("sales.customers", [customer(i, moved=1) for i in range(0, 800, 16)], fmt="csv")
    demo.delete("sales.customers", [(i,) for i in range(790, 800)])
    demo.upsert("inventory.stock", [stock(i, on_hand=0) for i in range(0, 300, 3)])
    demo.delete("inventory.stock", [(f"SKU-{i:05d}",) for i in range(270, 300)])


def step_compact(demo: Demo) -> None:
    """Compact the loaded data into large sorted objects (all of it before the snapshots)."""
    before = len(demo.store.objects_of(TENANT))
    demo.rewind("compact", TENANT, "--target-mb", "0.01")
    after = len(demo.store.objects_of(TENANT))
    demo.console.print(f"objects: {before} before compaction, {after} after")


def step_compact_customers(demo: Demo) -> None:
    """Compact sales.customers again: its merged objects now straddle the snapshots."""
    demo.rewind("compact", TENANT, "sales.customers")


def step_layout(demo: Demo) -> None:
    """The object layout a restore planner would classify."""
    demo.rewind("objects", TENANT)
    ts = demo.marks[SNAPSHOT][0]
    straddling = [o for _, o in demo.store.objects_of(TENANT) if o.min_ts <= ts < o.max_ts]
    demo.console.print(
        f"{len(straddling)} object(s) straddle snapshot {SNAPSHOT} (ts {ts}): "
        "a restore to it would rewrite only those and reuse the rest"
    )


def step_time_travel(demo: Demo) -> None:
    """The first orders now, and as of the snapshot: updates and a delete undone."""
    demo.rewind("query", TENANT, "sales.orders", "--limit", "8")
    demo.rewind("query", TENANT, "sales.orders", "--as-of", SNAPSHOT, "--limit", "8")


def step_accident(demo: Demo) -> None:
    """The accident: a runaway delete empties sales.orders."""
    keys = list(demo.model["sales.orders"])
    demo.delete("sales.orders", keys)
    demo.rewind("query", TENANT, "sales.orders", "--limit", "3")


def step_plan(demo: Demo) -> None:
    """The restore plan: per table, objects and bytes to reuse, rewrite and skip."""
    demo.rewind("restore-tenant", TENANT, "--snapshot", demo.scheduled, "--dry-run")


def step_restore(demo: Demo) -> None:
    """Physical restore to the scheduled snapshot, in place, with full verification."""
    demo.rewind("restore-tenant", TENANT, "--snapshot", demo.scheduled, "--verify", "full", "--yes")
    demo.model = copy.deepcopy(demo.marks[demo.scheduled][1])
    demo.rewind("query", TENANT, "sales.orders", "--limit", "5")
    demo.rewind("history", TENANT)


def step_verify(demo: Demo) -> None:
    """Every table, now and at the snapshot, equals the model of what was written."""
    times = {"now": (demo.store.now(), demo.model), SNAPSHOT: demo.marks[SNAPSHOT]}
    report = Table(title="store vs model (every row compared)")
    for column in ("table", *(f"rows @ {name}" for name in times), "matches"):
        report.add_column(column, justify="left" if column == "table" else "right")
    for table in TABLES:
        counts = []
        for label, (ts, model) in times.items():
            got = demo.store.read(TENANT, table, ts).to_pylist()
            want = [model[table][k] for k in sorted(model[table])]
            if got != want:
                raise DemoFailed(
                    f"{table} at {label} (ts {ts}): store has {len(got)} rows, "
                    f"model {len(want)}, or their values differ"
                )
            counts.append(f"{len(got):,}")
        report.add_row(table, *counts, "yes")
    demo.console.print(report)


def step_table_restore(demo: Demo) -> None:
    """One table back: a bad delete on sales.orders, found in the commit log and undone alone."""
    demo.rewind("pitr", "set", TENANT, "1h")  # every time from here on is restorable
    before = copy.deepcopy(demo.model["sales.orders"])
    demo.delete("sales.orders", sorted(before)[:50])  # the bad change
    demo.upsert("inventory.stock", [{"sku": "sku-new", "on_hand": 5, "price": 1.5}])  # a good one
    demo.rewind("history", TENANT, "--commits", "--limit", "3")
    bad = commit_history(demo.store.catalog, TENANT, table="sales.orders", limit=1)[0].ts
    demo.rewind("restore-table", TENANT, "sales.orders", "--before", str(bad), "--yes")
    demo.model["sales.orders"] = before  # inventory.stock keeps its later write
    demo.rewind("query", TENANT, "sales.orders", "--limit", "3")


STEPS: list[Callable[[Demo], None]] = [
    step_tenant_and_tables,
    step_initial_load,
    step_compact,
    step_scheduled_snapshot,
    step_changes,
    step_compact_customers,
    step_layout,
    step_time_travel,
    step_verify,
    step_accident,
    step_plan,
    step_restore,
    step_verify,
    step_table_restore,
    step_verify,
]


def fresh_home(home: Path) -> Path:
    """``home``, empty: made, or emptied if an earlier demo made it.

    Raises:
        DemoFailed: it holds something else; the demo does not delete it.
    """
    if home.exists() and any(home.iterdir()):
        if not (home / KEPT).exists():
            raise DemoFailed(f"{home} exists and was not made by the demo; move it away first")
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / KEPT).write_text("`make demo` writes this directory afresh on every run\n")
    return home.resolve()


def keep_warehouse(store: TableStore, home: Path) -> int:
    """Copy the demo's S3 warehouse to ``home/warehouse`` (a ``file://`` warehouse the
    catalog beside it owns, marker included); returns the number of objects."""
    kept = open_object_store(f"file://{home / 'warehouse'}")
    count = 0
    for info in store.objects.list(""):
        kept.put(info.key, store.objects.get(info.key))
        count += 1
    return count


def run(console: Console, s3: EmbeddedS3, workdir: Path, home: Path) -> None:
    s3.export_env()
    s3.create_bucket(BUCKET)
    os.environ["REWIND_CATALOG"] = f"sqlite:///{home / 'catalog.db'}"
    os.environ["REWIND_WAREHOUSE"] = f"s3://{BUCKET}/warehouse"
    console.print(f"S3 endpoint {s3.endpoint_url} (moto server)", highlight=False)
    for name in ("REWIND_CATALOG", "REWIND_WAREHOUSE"):
        console.print(f"export {name}={os.environ[name]}", highlight=False)
    files = workdir / "files"
    files.mkdir()
    store = TableStore.open(s3=environment_settings())  # as the CLI commands below get it
    try:
        demo = Demo(console, files, store)
        for number, step in enumerate(STEPS, 1):
            title = (step.__doc__ or step.__name__).strip().splitlines()[0]
            console.print(Text(f"\n{number}. {title}", style="bold magenta"))
            step(demo)
        kept = keep_warehouse(store, home)
    finally:
        store.close()
    console.print(
        f"\nThe demo's tenant, snapshots and restores are kept in {home} (the catalog, "
        f"and the S3 warehouse's {kept} objects copied to a file:// warehouse). Try:",
        highlight=False,
    )
    for line in (
        f"export REWIND_HOME={home}",
        f"rewind history {TENANT}",
        f"rewind snapshot list {TENANT}",
        f"rewind query {TENANT} sales.orders --as-of {SNAPSHOT} --limit 5",
        f"rewind restore-tenant {TENANT} --snapshot {SNAPSHOT} --to {TENANT}_then",
    ):
        console.print(f"  {line}", highlight=False, soft_wrap=True)


def main() -> int:
    console = render.stdout()
    started = time.monotonic()
    try:
        home = fresh_home(Path(os.environ.get("REWIND_DEMO_HOME", HOME)))
        with embedded_s3() as s3, tempfile.TemporaryDirectory(prefix="rewind-demo-") as tmp:
            run(console, s3, Path(tmp), home)
    except DemoFailed as e:
        console.print(Text.assemble(("demo failed: ", "bold red"), str(e)))
        return 1
    except MissingDependency as e:
        console.print(Text.assemble(("demo cannot start: ", "bold red"), e.message))
        return 1
    except Exception:
        console.print_exception(show_locals=False)
        return 1
    console.print(f"[bold green]demo passed[/] in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
