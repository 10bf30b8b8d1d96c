"""A toy environment that lives only here: a counter the agent adds 0, 1 or 2 to.

Nothing outside this folder names it. Its record is all openenv-gym needs: register it
(``openenv_gym.register_environment(RECORD)``) and ``toy/Counter-v0`` can be made, vectorised,
served, given to TRL as a tool and built as an image.
"""

from openenv_gym import EnvRecord

RECORD = EnvRecord(
    name="toy_counter",
    env_id="toy/Counter-v0",
    server="toy_env.server:CounterEnvironment",
    codec="toy_env.gym:codec",
    text_interface="toy_env.gym:text_interface",
    max_episode_steps=20,
    description="a counter: add 0, 1 or 2; done at 5",
)
