"""A Rewind table's schema as an Iceberg schema, and what makes an Iceberg table
an earlier export of the same table.

Types map one to one where Iceberg has the type (bool, int, long, float,
double, string, binary, date, decimal, timestamps in µs); ``int8``/``int16``
become ``int``, second and millisecond timestamps become µs, a timestamp in a
zone other than UTC becomes ``timestamptz`` (the instants are the same).
Nanosecond timestamps are refused: Iceberg's format 2 stores µs, and
cutting them would change the values. A column whose type maps one to one is
*native*: a Rewind object's Parquet column is what an Iceberg reader expects
of it, so the object can be copied as it is (engine.export.iceberg).

The primary key becomes the table's identifier fields (Iceberg forbids float
and double there: such a key is recorded only in the ``rewind.primary-key``
property). Every table Rewind exports carries ``rewind.source``
(``tenant/db.table``) and ``rewind.primary-key``: an export into an Iceberg
table is refused unless those match and every column both schemas share has
the same type and nullability (or ``--replace``). Columns added or dropped
since the last export are added or dropped in the Iceberg schema: the table's
older snapshots keep their schema, as Iceberg's time travel expects.

Copied objects hold Rewind's ``__ts`` and carry no Parquet field ids. The
table's name mapping (``schema.name-mapping.default``) gives each column's
name its field id, and ``__ts`` an id no column has (:data:`TS_FIELD_ID`):
the Iceberg spec says a reader ignores a mapped field the schema lacks, and
pyiceberg (which fails on a file column missing from the mapping) then
projects it away. Rewritten files carry field ids themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine.export.iceberg_catalog import pyiceberg
from tenants.errors import InvalidArgument
from tenants.schema import TS, TableSchema

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Transaction
    from pyiceberg.types import IcebergType

SOURCE = "rewind.source"
PRIMARY_KEY = "rewind.primary-key"
NAME_MAPPING = "schema.name-mapping.default"
TS_FIELD_ID = 2_147_483_446
"""``__ts``'s id in the name mapping: below the range the spec reserves for
metadata columns (2147483447 and up), and far above any column id a table
gets (ids count up from 1)."""
FIELD_ID = b"PARQUET:field_id"
UTC_NAMES = ("UTC", "Etc/UTC", "+00:00", "Z")


def iceberg_type(field: pa.Field, where: str) -> tuple[IcebergType, pa.DataType, bool]:
    """(Iceberg type, the Arrow type written for it, native) of a Rewind column.

    Raises:
        InvalidArgument: a type Iceberg cannot hold exactly (nanosecond times).
    """
    types = pyiceberg("pyiceberg.types")
    kind = field.type
    if pa.types.is_boolean(kind):
        return types.BooleanType(), kind, True
    if pa.types.is_int8(kind) or pa.types.is_int16(kind):
        return types.IntegerType(), pa.int32(), False
    if pa.types.is_int32(kind):
        return types.IntegerType(), kind, True
    if pa.types.is_int64(kind):
        return types.LongType(), kind, True
    if pa.types.is_float32(kind):
        return types.FloatType(), kind, True
    if pa.types.is_float64(kind):
        return types.DoubleType(), kind, True
    if pa.types.is_string(kind):
        return types.StringType(), kind, True
    if pa.types.is_large_string(kind):
        return types.StringType(), pa.string(), False
    if pa.types.is_binary(kind):
        return types.BinaryType(), kind, True
    if pa.types.is_date32(kind):
        return types.DateType(), kind, True
    if pa.types.is_decimal(kind):
        return types.DecimalType(kind.precision, kind.scale), kind, True
    if pa.types.is_timestamp(kind):
        if kind.unit == "ns":
            raise InvalidArgument(
                f"column {field.name!r} of {where} is {kind}: Iceberg (format 2) keeps "
                "microseconds, and cutting nanoseconds would change the values; export it "
                "with --format parquet"
            )
        if kind.tz is None:
            return types.TimestampType(), pa.timestamp("us"), kind.unit == "us"
        utc = kind.tz in UTC_NAMES
        return types.TimestamptzType(), pa.timestamp("us", "UTC"), kind.unit == "us" and utc
    raise InvalidArgument(f"column {field.name!r} of {where} is {kind}: Iceberg has no such type")


def columns(schema: TableSchema, where: str) -> list[tuple[str, IcebergType, bool]]:
    """(name, Iceberg type, required) of each column, in order."""
    return [(f.name, iceberg_type(f, where)[0], not f.nullable) for f in schema.arrow()]


def native(schema: TableSchema, where: str) -> bool:
    """Whether every column's stored Parquet is what Iceberg reads for its type."""
    return all(iceberg_type(f, where)[2] for f in schema.arrow())


def new_schema(schema: TableSchema, where: str) -> Schema:
    """The Iceberg schema of a new export: ids from 1 in column order, the key as
    identifier fields (when Iceberg allows it)."""
    schemas = pyiceberg("pyiceberg.schema")
    types = pyiceberg("pyiceberg.types")
    fields = [
        types.NestedField(field_id=i, name=name, field_type=kind, required=required)
        for i, (name, kind, required) in enumerate(columns(schema, where), start=1)
    ]
    ids = {f.name: f.field_id for f in fields}
    identifier = [ids[k] for k in schema.primary_key] if _identifiable(schema, where) else []
    return schemas.Schema(*fields, identifier_field_ids=identifier)


def _identifiable(schema: TableSchema, where: str) -> bool:
    """Iceberg's identifier fields may not be float or double."""
    types = pyiceberg("pyiceberg.types")
    kinds = dict((name, kind) for name, kind, _ in columns(schema, where))
    return not any(
        isinstance(kinds[k], (types.FloatType, types.DoubleType)) for k in schema.primary_key
    )


def properties(
    schema: Schema, source: str, primary_key: tuple[str, ...], previous: str | None = None
) -> dict[str, str]:
    """The table properties every export sets: where it comes from, its key, its
    name mapping (:func:`name_mapping`)."""
    return {
        SOURCE: source,
        PRIMARY_KEY: json.dumps(list(primary_key)),
        NAME_MAPPING: name_mapping(schema, previous),
    }


def name_mapping(schema: Schema, previous: str | None = None) -> str:
    """The schema's columns by name, ``__ts`` (the module doc), and every name the
    ``previous`` mapping had that the schema lost: files of older snapshots still
    hold dropped columns, and a reader maps every column of a file it reads."""
    mapping = pyiceberg("pyiceberg.table.name_mapping")
    fields = list(mapping.create_mapping_from_schema(schema).root)
    named = {name for field in fields for name in field.names}
    if previous:
        try:
            old = mapping.parse_mapping_from_json(previous)
        except ValueError:
            old = None  # not a mapping (a foreign table's): nothing to keep
        for field in old.root if old is not None else ():
            names = [n for n in field.names if n not in named and n != TS]
            if names and field.field_id is not None:
                fields.append(mapping.MappedField(field_id=field.field_id, names=names))
                named.update(names)
    fields.append(mapping.MappedField(field_id=TS_FIELD_ID, names=[TS]))
    return str(mapping.NameMapping(fields).model_dump_json())


def arrow_target(schema: Schema, table: TableSchema, where: str) -> pa.Schema:
    """The Arrow schema rewritten files are written with: each column in the
    Iceberg schema's order, of the type written for it, with its field id."""
    arrow = table.arrow()
    fields = []
    for field in schema.fields:
        written = iceberg_type(arrow.field(field.name), where)[1]
        fields.append(
            pa.field(
                field.name,
                written,
                not field.required,
                metadata={FIELD_ID: str(field.field_id).encode()},
            )
        )
    return pa.schema(fields)


def why_different(existing: Any, table: TableSchema, source: str, where: str) -> str | None:
    """Why the Iceberg table ``existing`` is not an earlier export of ``source``
    (None: it is one, and its schema can follow the table's)."""
    props = existing.properties
    if SOURCE not in props:
        return "was not written by Rewind (no rewind.source property)"
    if props[SOURCE] != source:
        return f"holds {props[SOURCE]}"
    if props.get(PRIMARY_KEY) != json.dumps(list(table.primary_key)):
        return (
            f"has primary key {props.get(PRIMARY_KEY)}, not {json.dumps(list(table.primary_key))}"
        )
    if existing.spec().fields:
        return "is partitioned"
    current = {f.name: f for f in existing.schema().fields}
    for name, kind, required in columns(table, where):
        if name in current and (current[name].field_type, current[name].required) != (
            kind,
            required,
        ):
            have = current[name]
            return (
                f"has column {name!r} as {'required' if have.required else 'optional'} "
                f"{have.field_type}, not {'required' if required else 'optional'} {kind}"
            )
    return None


def follow(txn: Transaction, table: TableSchema, where: str, *, replace: bool) -> None:
    """Make the Iceberg schema in ``txn`` the table's: add and drop columns (and,
    with ``replace``, drop columns of another type, the partitioning and the old
    identifier fields first, then add the columns back)."""
    wanted = columns(table, where)
    names = {name for name, _, _ in wanted}
    current = {f.name: f for f in txn.table_metadata.schema().fields}
    clash = {
        name
        for name, kind, required in wanted
        if name in current
        and (current[name].field_type, current[name].required) != (kind, required)
    }
    if replace:
        spec = txn.table_metadata.spec()
        if spec.fields:
            with txn.update_spec() as update_spec:
                for partition in spec.fields:
                    update_spec.remove_field(partition.name)
    gone = [name for name in current if name not in names or name in clash]
    if gone:
        with _schema_update(txn) as update:
            update.set_identifier_fields()
            for name in gone:
                update.delete_column(name)
    present = {f.name for f in txn.table_metadata.schema().fields}
    with _schema_update(txn) as update:
        for name, kind, required in wanted:
            if name not in present:
                update.add_column(name, kind, required=required)
        if _identifiable(table, where):
            update.set_identifier_fields(*table.primary_key)
        else:
            update.set_identifier_fields()


@contextmanager
def _schema_update(txn: Transaction) -> Iterator[Any]:
    """A schema update that may add required columns: every file the export's
    snapshot holds has them (older snapshots keep their own schema)."""
    with txn.update_schema(allow_incompatible_changes=True) as update:
        yield update
