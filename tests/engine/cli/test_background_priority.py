"""The CLI runs an instant restore's rewrite, once the tenant is usable, at a lower
CPU priority (engine.cli.background), configurable and validated."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.cli.background import DEFAULT_NICE, background_nice
from tenants.errors import InvalidArgument


def test_the_increment_defaults_to_10_and_accepts_0_to_19(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REWIND_BACKGROUND_NICE", raising=False)
    assert background_nice() == DEFAULT_NICE == 10
    for text, value in (("0", 0), ("19", 19), (" 7 ", 7)):
        monkeypatch.setenv("REWIND_BACKGROUND_NICE", text)
        assert background_nice() == value


@pytest.mark.parametrize("text", ["-1", "20", "abc", "1.5", "٣"])
def test_a_bad_increment_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("REWIND_BACKGROUND_NICE", text)
    with pytest.raises(InvalidArgument, match="REWIND_BACKGROUND_NICE.*from 0"):
        background_nice()


def test_the_background_lowers_its_own_process_once() -> None:
    code = (
        "import os; from engine.cli.background import run_in_background; "
        "before = os.nice(0); run_in_background(5); run_in_background(5); "
        "print(before, os.nice(0) - before)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, lowered = map(int, done.stdout.split())
    assert lowered == min(5, 19 - before)
