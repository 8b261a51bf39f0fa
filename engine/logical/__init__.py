"""Logical dump-and-reload: the fallback restore path and the portable backup."""
