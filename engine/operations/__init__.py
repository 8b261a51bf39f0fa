"""Operations: the runs journal, status, metrics and restore drills (docs/operations.md)."""
