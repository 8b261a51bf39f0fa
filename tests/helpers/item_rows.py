"""The two-column ``(id int64 key, v string)`` table most tests write: its schema
and builders for the rows, keys and pairs that go in and come out."""

from __future__ import annotations

import pyarrow as pa

from tenants.schema import TableSchema

SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([p[0] for p in pairs], pa.int64()),
            "v": pa.array([p[1] for p in pairs], pa.string()),
        }
    )


def keys(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def pairs(table: pa.Table) -> list[tuple[int, str]]:
    return list(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))
