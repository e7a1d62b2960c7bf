"""Completion accounting exists twice: `ngrp check` (audit/findings) and `ngrp profile` (profile/summary,
Gym's completion summary). They count the same thing from different readers, so they must agree on every
run: rollouts expected, completed and missing, and task groups complete, partial and with none."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profile_data import make_run, write_run

from ngrp_lib.audit.check import check_run
from ngrp_lib.profile import ProfileOptions, run_profile


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    shape=st.sampled_from(["plain", "fan_out", "env_servers", "no_agent"]),
    tasks=st.integers(1, 8),
    repeats=st.integers(1, 4),
    p_missing=st.sampled_from([0.0, 0.2, 0.6, 1.0]),
)
def test_check_and_profile_count_completion_alike(tmp_path_factory, seed, shape, tasks, repeats, p_missing):
    folder = tmp_path_factory.mktemp("run")
    run = make_run(seed, shape, tasks=tasks, repeats=repeats, p_missing=p_missing)
    inputs, rollouts = write_run(run, folder)
    check = check_run(inputs, rollouts)
    profile = run_profile(inputs, rollouts, ProfileOptions(output_dir=folder / "out", allow_partial=True))
    gym = profile.completion
    assert (check.counts.expected, check.counts.completed, check.counts.missing) == (
        gym.expected_rollout_rows,
        gym.completed_rollout_rows,
        gym.missing_rollout_rows,
    )
    # Per agent, both group by (task, agent): complete / partial / none must be the same numbers.
    by_agent = {entry["agent"]: entry["tasks"] for entry in profile.agents}
    for agent in check.agents:
        ours = by_agent[agent.agent]
        assert (agent.tasks.total, agent.tasks.complete, agent.tasks.partial, agent.tasks.none) == (
            ours["total"],
            ours["complete"],
            ours["partial"],
            ours["dropped"],
        )
    if shape != "env_servers":  # Gym groups by the environment-server stamp there, check by agent
        assert (check.tasks.total, check.tasks.complete, check.tasks.partial, check.tasks.none) == (
            gym.total_input_rows,
            gym.complete_input_rows,
            gym.partial_input_rows,
            gym.missing_input_rows,
        )
