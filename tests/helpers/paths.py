"""Where the tests find the repository and their helper scripts, whatever
folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

HELPERS = Path(__file__).resolve().parent
ROOT = HELPERS.parent.parent
