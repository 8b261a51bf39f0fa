"""Table schemas: typed columns, a primary key, and a stable fingerprint.

A schema version is stored as JSON (column name, Arrow type string, nullable,
default; a date, timestamp or decimal default as text, see tenants.defaults) plus
the key. The fingerprint hashes the ordered (name, type,
nullable) list and the key, so every object can name the schema it was
written with, and a restore can prove each object belongs to its table.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tenants.defaults import canonical_default, default_to_json
from tenants.errors import InvalidArgument, SchemaMismatch
from tenants.names import column_name

if TYPE_CHECKING:
    import pyarrow as pa

TS = "__ts"

# Each simple type by the pyarrow function that makes it: pyarrow is imported
# when a type is first parsed, not with this module (a command that lists
# tenants never needs it).
_SIMPLE_TYPES: dict[str, str] = {
    "bool": "bool_",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float": "float32",
    "double": "float64",
    "string": "string",
    "large_string": "large_string",
    "binary": "binary",
    "date32[day]": "date32",
}
_ALIASES = {
    "boolean": "bool",
    "int": "int32",
    "integer": "int32",
    "bigint": "int64",
    "long": "int64",
    "float32": "float",
    "float64": "double",
    "str": "string",
    "utf8": "string",
    "text": "string",
    "date": "date32[day]",
    "date32": "date32[day]",
    "timestamp": "timestamp[us, tz=UTC]",
}
_TIMESTAMP = re.compile(r"timestamp\[(s|ms|us|ns)(?:, tz=([A-Za-z0-9_/+:-]+))?\]")
_DECIMAL = re.compile(r"decimal(?:128)?\((\d+), ?(\d+)\)")


def parse_type(text: str) -> pa.DataType:
    """Parse an Arrow type string (as ``str(type)`` prints it) or a common alias.

    Only types Spark can carry are supported (no unsigned integers), so every
    table reads the same through the local and the Spark reader.
    """
    import pyarrow as pa

    name = _ALIASES.get(text.strip().lower(), text.strip())
    if name in _SIMPLE_TYPES:
        made: pa.DataType = getattr(pa, _SIMPLE_TYPES[name])()
        return made
    if match := _TIMESTAMP.fullmatch(name):
        return pa.timestamp(match.group(1), tz=match.group(2))
    if match := _DECIMAL.fullmatch(name):
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    supported = sorted(set(_SIMPLE_TYPES) | set(_ALIASES)) + [
        "timestamp[us, tz=UTC]",
        "decimal(p, s)",
    ]
    raise InvalidArgument(f"unsupported column type {text!r}; supported: {', '.join(supported)}")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    default: Any = None

    @property
    def arrow_type(self) -> pa.DataType:
        return parse_type(self.type)

    def to_json(self) -> dict[str, Any]:
        """The column as JSON: dates, timestamps and decimals defaults as text (tenants.defaults)."""
        return {
            "name": self.name,
            "type": self.type,
            "nullable": self.nullable,
            "default": default_to_json(self.arrow_type, self.default),
        }


@dataclass(frozen=True)
class TableSchema:
    """Ordered columns and the primary key (one or more column names)."""

    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        for name in names:
            column_name(name)
        if len(set(names)) != len(names):
            raise InvalidArgument(f"duplicate column names in {names}")
        if not self.primary_key:
            raise InvalidArgument("a table needs a primary key of one or more columns")
        for key in self.primary_key:
            if key not in names:
                raise InvalidArgument(f"primary key column {key!r} is not a column of {names}")
        for column in self.columns:
            column.arrow_type  # noqa: B018 - validates the type string early
        normalized = tuple(
            Column(
                c.name,
                str(c.arrow_type),
                c.nullable and c.name not in self.primary_key,
                canonical_default(c.name, str(c.arrow_type), c.arrow_type, c.default),
            )
            for c in self.columns
        )
        object.__setattr__(self, "columns", normalized)
        object.__setattr__(self, "fingerprint", _fingerprint(normalized, self.primary_key))

    @classmethod
    def of(
        cls, columns: Sequence[tuple[str, str] | Column], primary_key: Sequence[str]
    ) -> TableSchema:
        cols = tuple(c if isinstance(c, Column) else Column(c[0], c[1]) for c in columns)
        return cls(cols, tuple(primary_key))

    @classmethod
    def from_json(cls, columns_json: str, primary_key_json: str) -> TableSchema:
        cols = tuple(Column(**c) for c in json.loads(columns_json))
        return cls(cols, tuple(json.loads(primary_key_json)))

    def columns_json(self) -> str:
        return json.dumps([c.to_json() for c in self.columns])

    def primary_key_json(self) -> str:
        return json.dumps(list(self.primary_key))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise SchemaMismatch(f"no column {name!r} in {self.names}")

    def arrow(self) -> pa.Schema:
        """The user-visible Arrow schema (no ``__ts``)."""
        import pyarrow as pa

        return pa.schema([pa.field(c.name, c.arrow_type, c.nullable) for c in self.columns])

    def key_arrow(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([pa.field(k, self.column(k).arrow_type, False) for k in self.primary_key])

    def data_arrow(self) -> pa.Schema:
        """Schema of a data object: the columns plus ``__ts``."""
        import pyarrow as pa

        return self.arrow().append(pa.field(TS, pa.int64(), False))

    def tomb_arrow(self) -> pa.Schema:
        """Schema of a tombstone object: the key plus ``__ts``."""
        import pyarrow as pa

        return self.key_arrow().append(pa.field(TS, pa.int64(), False))


def _fingerprint(columns: Sequence[Column], primary_key: Sequence[str]) -> str:
    payload = json.dumps(
        {"columns": [[c.name, c.type, c.nullable] for c in columns], "key": list(primary_key)},
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]
