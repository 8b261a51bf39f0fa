"""Assertions shared by the CLI tests."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import Result


def ok(result: Result) -> Result:
    """Assert the command succeeded, showing its output if not."""
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}\n{result.exception!r}"
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)
