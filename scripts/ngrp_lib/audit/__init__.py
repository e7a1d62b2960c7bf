"""Auditing artifacts: `validate` (each line against its schema), `check` (every key accounted for) and
`health` (is each rollout's reward a measurement of the policy?)."""
