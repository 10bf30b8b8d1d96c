"""The record of Wordle: what openenv-gym knows of it (read by :mod:`openenv_gym.envs`)."""

from openenv_gym.envs import EnvRecord

__all__ = ["RECORD"]

RECORD = EnvRecord(
    name="wordle",
    env_id="openenv/Wordle-v0",
    server="openenv_gym_servers.wordle:WordleEnvironment",
    codec="openenv_gym_servers.wordle.gym:codec",
    text_interface="openenv_gym_servers.wordle.gym:text_interface",
    description="Wordle (TextArena's rules), five-letter guesses as text",
    rank=0,  # listings: wordle, echo, catch, then the others by name
    example_actions=({"message": "[crane]"},),  # a valid guess: its feedback shows the secret
)
