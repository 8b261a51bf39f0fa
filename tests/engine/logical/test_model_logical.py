"""Model-based test of logical restore: random histories, three answers that must agree.

The histories are those of ``test_model_restore`` (writes, updates, deletes of
present and absent keys, partial and full compactions with small targets,
snapshots created and dropped, a column added and maybe dropped), with the
same oracle beside the store. For every standing snapshot S and for "now",
the tenant is restored twice as a clone, logically (dump at S, reload) and
physically (reuse and rewrite objects). Both clones must read exactly as the
oracle at S, with the schema as of S; the logical one must hold only its own
objects and leave no staging dump behind; the source must be untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import event, given

from engine.restore.job import restore_tenant
from tenants.objectstore.embedded import EmbeddedS3
from tests.engine.restore.test_model_restore import DB, TENANT, Model, Op, histories, model
from tests.helpers.restores import reads

TABLES = ("items", "orders")


def check_logical_equals_physical_equals_oracle(m: Model, *, in_hypothesis: bool = True) -> None:
    store = m.store
    now = store.now()
    source_before = reads(store, TENANT)
    objects_before = store.objects_of(TENANT)
    points: list[tuple[str | int, int]] = sorted(m.snapshots.items(), key=lambda p: p[1])
    points.append((now, now))
    for index, (point, at_ts) in enumerate(points):
        logical = restore_tenant(store, TENANT, point, to=f"logical{index}", method="logical")
        physical = restore_tenant(
            store, TENANT, point, to=f"physical{index}", method="physical", executor="local"
        )
        assert (logical.method, physical.method) == ("logical", "physical")
        assert logical.plan.at_ts == physical.plan.at_ts == at_ts
        for clone in (logical.tenant.name, physical.tenant.name):
            tables = {t.name: t for t in store.tables(clone)}
            assert sorted(tables) == list(TABLES), clone
            for table in TABLES:
                assert tables[table].schema == m.schema_at(table, at_ts), (clone, table)
                got = store.read(clone, f"{DB}.{table}").to_pylist()
                assert got == m.expected(table, at_ts), f"{clone}/{table} restored to {point}"
        own = f"tenants/{logical.tenant.id}/"
        assert all(o.key.startswith(own) for _, o in store.objects_of(logical.tenant.name))
        assert list(store.objects.list("staging/")) == []
    if in_hypothesis:
        event(f"restore points: {len(points)}")
    assert reads(store, TENANT) == source_before
    assert store.objects_of(TENANT) == objects_before
    assert [t.name for t in store.tenants(include_dropped=True) if t.state == "staging"] == []


@given(history=histories())
def test_logical_clone_equals_physical_clone_equals_the_oracle_at_every_protected_time(
    s3_server: EmbeddedS3, new_catalog_uri: Callable[[], str], history: list[Op]
) -> None:
    with model(s3_server, new_catalog_uri()) as m:
        for op in history:
            m.apply(op)
        check_logical_equals_physical_equals_oracle(m)


def test_logical_restore_of_a_tenant_whose_column_was_added_then_dropped(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
) -> None:
    """A fixed history: the dump at each S carries the schema of that S, not today's."""
    from tests.engine.restore.test_model_restore import Alter, Compact, Snapshot, Write

    history: list[Any] = [
        Write("items", ({"id": 1, "v": "a", "note": None},), ()),
        Snapshot(),  # s0: (id, v)
        Alter("add_note"),
        Write("items", ({"id": 2, "v": "b", "note": "n"},), ({"id": 1},)),
        Snapshot(),  # s1: (id, v, note)
        Alter("drop_note"),
        Write("orders", ({"id": 0, "region": "eu", "qty": 5},), ()),
        Compact(None, True, 1),
        Snapshot(),  # s2: (id, v) again
    ]
    with model(s3_server, new_catalog_uri()) as m:
        for op in history:
            m.apply(op)
        assert [s.names for _, s in m.schemas["items"]] == [
            ["id", "v"],
            ["id", "v", "note"],
            ["id", "v"],
        ]
        check_logical_equals_physical_equals_oracle(m, in_hypothesis=False)
