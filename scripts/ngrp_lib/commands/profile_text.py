"""`ngrp profile` as text: the lines Gym's own profiler prints, with our counts."""

from __future__ import annotations

from ..profile.api import GymCompletion


def render_gym_text(s: GymCompletion, masked: int, paths: dict[str, str]) -> str:
    return "\n".join(
        [
            "Profiling outputs:",
            f"Reward profile completion: {s.completed_rollout_rows}/{s.expected_rollout_rows} "
            "rollout rows "
            f"({s.reward_profile_completion_pct:.2f}%)",
            f"Input rows: {s.total_input_rows} total; {s.complete_input_rows} complete; "
            f"{s.partial_input_rows} partial; "
            f"{s.missing_input_rows} without rollouts dropped from output.",
            f"Masked from quality metrics: {masked} rollout rows (kept in completion accounting above).",
            f"Reward profiling outputs: {paths['reward_profiling']}",
            f"Agent-level metrics: {paths['agent_metrics']}",
            f"Repeat-level metrics: {paths['repeat_level_metrics']}",
        ]
    )
