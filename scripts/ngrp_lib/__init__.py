"""nemo-gym-reward-profiling: collect, validate and profile RL rollouts in NeMo Gym's formats."""

__version__ = "0.1.0"
