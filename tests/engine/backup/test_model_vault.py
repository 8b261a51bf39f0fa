"""Model-based test of a vault: random histories of locked, held and plain backups,
holds, deletes, attacks and a clock that moves, against a model of what may be deleted.

One clock moves for both sides: Rewind's (``time.time_ns``, which gives a lock
its start and a delete its "now") and moto's (``moto.s3.models.utcnow``, which
decides whether S3 refuses a delete; moto's server runs in this process). Each
step is checked against the model: a delete is refused (``Locked``) exactly
while a lock or hold protects the backup, refused as a bad input
(``InvalidArgument``) for a bypass that cannot apply, and done otherwise;
``backup list`` shows exactly the backups the model holds, whatever delete
markers an attacker put over the keys. At the end every backup still held
restores into a fresh deployment and reads as the source did at its time:
deleting one backup never took an object another one needs.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import moto.s3.models
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st

from engine.backup.api import backups, create_backup, delete_backup, restore_backup
from engine.backup.locked import set_hold
from tenants.errors import InvalidArgument, Locked
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.backups import AT_MON, AT_SUN, build_source, new_bucket
from tests.helpers.restores import reads

MINUTE_US = 60_000_000


@dataclass
class Held:
    """The model of one backup: its lock (mode, end in µs), its hold, what it holds."""

    kind: str
    mode: str | None
    until_us: int
    hold: bool
    at: str


class MovedClock:
    """Rewind's and moto's clocks, both ``offset_us`` ahead of the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset_us = 0
        real_ns, real_utcnow = time.time_ns, moto.s3.models.utcnow
        monkeypatch.setattr(time, "time_ns", lambda: real_ns() + self.offset_us * 1000)
        monkeypatch.setattr(
            moto.s3.models,
            "utcnow",
            lambda: real_utcnow() + dt.timedelta(microseconds=self.offset_us),
        )

    def now_us(self) -> int:
        return time.time_ns() // 1000


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("backup"),
            st.sampled_from(["physical", "logical"]),
            st.sampled_from([None, "governance", "compliance"]),
            st.sampled_from([10, 60, 600]),  # minutes
            st.sampled_from(["mon", "sun"]),
        ),
        st.tuples(st.just("hold"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("delete"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("advance"), st.sampled_from([5, 30, 120, 700])),
        st.tuples(st.just("attack")),
    ),
    min_size=3,
    max_size=10,
)


@pytest.fixture
def moved(monkeypatch: pytest.MonkeyPatch) -> Iterator[MovedClock]:
    yield MovedClock(monkeypatch)


def expected_delete(held: Held, bypass: bool, now_us: int) -> type[Exception] | None:
    """What deleting ``held`` must do: None (done), or the error it is refused with."""
    if held.mode is None:
        return InvalidArgument if bypass else None
    if held.mode == "compliance" and bypass:
        return InvalidArgument
    if now_us < held.until_us and not (held.mode == "governance" and bypass):
        return Locked
    if held.hold:
        return Locked
    return None


@given(history=ops)
def test_deletes_are_refused_or_done_exactly_by_date_mode_and_hold(
    history: list[tuple[Any, ...]],
    store: TableStore,
    s3_server: EmbeddedS3,
    moved: MovedClock,
    new_catalog_uri: Callable[[], str],
) -> None:
    if not store.tenants():
        build_source(store)
    vault = f"rewind-vault-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(vault, object_lock=True)
    uri = f"s3://{vault}/rewind"
    s3 = boto3.client("s3", **s3_server.settings.to_boto3())
    model: dict[str, Held] = {}
    made_any = False
    for op in history:
        note(repr(op))
        ids = sorted(model, key=lambda i: list(model).index(i))
        if op[0] == "backup":
            _, kind, mode, minutes, at = op
            start = moved.now_us()
            lock = {} if mode is None else {"lock": mode, "retain": f"{minutes}m"}
            made = create_backup(store, "acme", at, uri, kind=kind, **lock)
            model[made.backup_id] = Held(kind, mode, start + minutes * MINUTE_US, False, at)
            made_any = True
        elif op[0] == "hold" and ids:
            backup_id = ids[op[1] % len(ids)]
            if model[backup_id].mode is None:
                with pytest.raises(InvalidArgument, match="not locked"):
                    set_hold(uri, backup_id, op[2])
            else:
                set_hold(uri, backup_id, op[2])
                model[backup_id].hold = op[2]
        elif op[0] == "delete" and ids:
            backup_id, bypass = ids[op[1] % len(ids)], op[2]
            refused = expected_delete(model[backup_id], bypass, moved.now_us())
            event(f"delete: {refused.__name__ if refused else 'done'}")
            if refused is None:
                delete_backup(uri, backup_id, bypass_governance=bypass)
                del model[backup_id]
            else:
                with pytest.raises(refused):
                    delete_backup(uri, backup_id, bypass_governance=bypass)
        elif op[0] == "advance":
            moved.offset_us += op[1] * MINUTE_US
        elif op[0] == "attack":
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=vault):
                for item in page.get("Contents", []):
                    s3.delete_object(Bucket=vault, Key=item["Key"])  # a delete marker
        if made_any:  # before the first backup the destination does not exist yet
            assert {e.backup_id for e in backups(uri) if e.complete} == set(model)
    fresh = TableStore.open(
        new_catalog_uri(),
        f"s3://{new_bucket(s3_server, 'rewind-drill')}/wh",
        s3=store.objects.warehouse.s3,
    )
    try:
        for index, (backup_id, held) in enumerate(model.items()):
            name = f"r{index}"
            restore_backup(fresh, uri, backup_id, tenant=name)
            assert reads(fresh, name) == (AT_MON if held.at == "mon" else AT_SUN), held
    finally:
        fresh.close()
    # Every lock ends: deleting what is left leaves no object version behind, not even
    # those an earlier delete had to keep while their (slightly longer) locks lasted.
    moved.offset_us += 3 * 24 * 60 * MINUTE_US
    for backup_id, held in model.items():
        if held.hold:
            set_hold(uri, backup_id, False)
        delete_backup(uri, backup_id)
    left = [
        v["Key"]
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=vault)
        for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        if "/objects/" in v["Key"] or "/backups/" in v["Key"]
    ]
    assert left == []
