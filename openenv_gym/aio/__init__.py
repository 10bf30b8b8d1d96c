"""The asyncio API: the same envs, awaited on the caller's running loop.

>>> import asyncio, openenv_gym.aio
>>> async def main():
...     async with openenv_gym.aio.make_vec("openenv/Echo-v0", num_envs=4) as envs:
...         obs, infos = await envs.reset(seed=0)
...         obs, rewards, terminations, truncations, infos = await envs.step(["hi"] * 4)
...     return obs
>>> asyncio.run(main())
('hi', 'hi', 'hi', 'hi')

:func:`make` and :func:`make_vec` take ``gymnasium.make``'s and ``gymnasium.make_vec``'s
arguments and return :class:`AsyncOpenEnvEnv` / :class:`AsyncOpenEnvVectorEnv`: the engine
of the sync envs (:mod:`openenv_gym.vector.engine`) under an asyncio driver
(:mod:`openenv_gym.aio.driver`), with the same spaces, seeding, autoreset, errors and
providers. See ``docs/asyncio.md``.
"""

from openenv_gym.aio.envs import AsyncOpenEnvEnv, AsyncOpenEnvVectorEnv, Making, make, make_vec

__all__ = ["AsyncOpenEnvEnv", "AsyncOpenEnvVectorEnv", "Making", "make", "make_vec"]
