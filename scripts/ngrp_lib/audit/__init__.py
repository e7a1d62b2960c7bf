"""Auditing artifacts: `validate` (each line against its schema) and `check` (every key accounted for)."""
