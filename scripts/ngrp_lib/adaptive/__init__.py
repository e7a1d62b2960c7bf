"""Adaptive collection (`collect --adaptive`): rounds of repeats driven above the collector (`collect`),
decided by the stopping rules of `stats.adaptive`."""
