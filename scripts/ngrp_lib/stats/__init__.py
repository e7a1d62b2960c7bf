"""Statistics over reward profiles: loading, per-task estimators and their registry, uncertainty (t and
the task bootstrap), bounded intervals for rates (intervals), variance, reward vs length, the typed
results, paired comparison (compare, paired), curriculum export."""
