"""One catalog layer: the domain modules reach the catalog only through tenants/catalog/.

Issue 12 moves every statement behind named functions in ``tenants.catalog``
so a second backend has one layer to speak, not SQL scattered through the
domain. These tests read the source: a statement or a raw ``tx`` call anywhere in
``tenants/`` or ``engine/`` outside ``tenants/catalog/`` fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

# Every module of the store and the engine, except the catalog layer itself.
DOMAIN = sorted(
    str(path.relative_to(ROOT))
    for package in ("tenants", "engine")
    for path in (ROOT / package).rglob("*.py")
    if not path.is_relative_to(ROOT / "tenants" / "catalog")
)

STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP)\s")
RAW_TX_CALLS = {"execute", "executemany", "all", "one", "scalar", "tuples"}


def sql_in(path: Path) -> list[str]:
    """``line: what`` for every SQL string and every raw ``tx.<call>(...)`` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if STATEMENT.match(node.value):
                found.append(f"{node.lineno}: {node.value.strip()[:60]!r}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in RAW_TX_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "tx"
        ):
            found.append(f"{node.lineno}: tx.{node.func.attr}(...)")
    return found


@pytest.mark.parametrize("module", DOMAIN)
def test_no_sql_outside_the_catalog_layer(module: str) -> None:
    found = sql_in(ROOT / module)
    assert not found, f"{module} talks SQL; move it into tenants/catalog/: {found}"


def test_sql_finder_sees_statements_and_raw_tx_calls(tmp_path: Path) -> None:
    """The check above would pass vacuously if the finder saw nothing."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(tx, t):\n"
        '    tx.execute("DELETE FROM snapshots WHERE tenant_id = ?", (t,))\n'
        '    return tx.one(f"SELECT * FROM tables t WHERE {t}")\n'
    )
    found = sql_in(sample)
    assert any("DELETE FROM snapshots" in f for f in found)
    assert any("SELECT * FROM tables" in f for f in found)
    assert sum("tx." in f for f in found) == 2
