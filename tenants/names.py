"""Validation of user-supplied names, before any I/O.

Names never become paths: objects are keyed by immutable ids. Validating here
keeps a bad name from reaching SQL, S3 or a log line unquoted.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from tenants.errors import InvalidName

TENANT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")
OBJECT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
RESERVED_COLUMNS = frozenset({"__ts", "__kind"})


def tenant_name(name: str) -> str:
    """Return ``name`` if it is a valid tenant name, else raise ``InvalidName``."""
    if not isinstance(name, str) or not TENANT_NAME.fullmatch(name):
        raise InvalidName(
            f"invalid tenant name {name!r}: use 1-63 characters, a lowercase letter "
            "first, then lowercase letters, digits, '_' or '-'"
        )
    return name


def object_name(name: str, what: str = "table") -> str:
    """Validate a database, table or column name (``what`` names it in the error)."""
    if not isinstance(name, str) or not OBJECT_NAME.fullmatch(name):
        raise InvalidName(
            f"invalid {what} name {name!r}: use 1-128 characters, a letter or '_' "
            "first, then letters, digits or '_'"
        )
    return name


def column_name(name: str) -> str:
    """Validate a column name; names starting with ``__`` are reserved."""
    object_name(name, "column")
    if name.startswith("__"):
        raise InvalidName(f"invalid column name {name!r}: names starting with '__' are reserved")
    return name


def qualified_table(text: object) -> tuple[str, str]:
    """Split ``DB.TABLE`` into validated parts (``InvalidName`` for anything else,
    a non-string too)."""
    if not isinstance(text, str):
        raise InvalidName(
            f"invalid table reference {text!r}: expected DB.TABLE, one string such as 'shop.orders'"
        )
    parts = text.split(".")
    if len(parts) != 2:
        raise InvalidName(f"invalid table reference {text!r}: expected DB.TABLE")
    return object_name(parts[0], "database"), object_name(parts[1], "table")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'acme'?)"`` for a name close to one that exists, else ``""``.

    A NotFound message ends with it, as a misspelled command's usage error
    does: the user sees the name they meant without listing everything.
    """
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"


# Ids that become object keys. Each kind has its own validator so the error
# names what was wrong; all share one shape: letters, digits, '_' and '-', so
# no id can hold a '/', a '\', a '.', a '%' escape or a NUL, and none can
# step out of the prefix it is joined to.
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def _checked_id(text: object, kind: str, hint: str) -> str:
    if not isinstance(text, str) or not ID.fullmatch(text):
        raise InvalidName(
            f"invalid {kind} {text!r}: an id is 1-128 letters, digits, '_' or '-' "
            f"(no '/', '.', '\\\\' or '%'); {hint}"
        )
    return text


def backup_id(text: object) -> str:
    """Validate a backup id before it names ``backups/<id>/`` at a destination."""
    return _checked_id(text, "backup id", "see `rewind backup list URI`")


def job_id(text: object) -> str:
    """Validate a restore job id before it reaches the catalog or ``staging/<id>/``."""
    return _checked_id(text, "restore job id", "see `rewind history TENANT`")


def staging_id(text: object) -> str:
    """Validate a staging tenant id before it names ``tenants/<id>/``."""
    return _checked_id(text, "staging tenant id", "ids are made by Rewind; pass the one it printed")
