"""Workers for the methods measured under our own interpreter; ``run.py`` starts one per cell.

    python benchmarks/_methods.py --method a     # then: {"cmd": "open", "spec": {...}} on stdin

Methods (the README defines them): ``a`` OpenEnvVectorEnv over the batched protocol,
``b`` the same over OpenEnv's JSON ``/ws``, ``d`` ``gymnasium.vector.AsyncVectorEnv`` of
our single env, ``e`` ``SyncVectorEnv`` of the env logic in process (no network), ``f``
the raw msgpack/WebSocket ceiling, ``shard`` OpenEnvVectorEnv over K servers of the busy
env, ``open`` the time to open N sessions on a running server, ``tool`` one Wordle tool call
through our TRL integration (``environment_factory``), ``rollout`` the env side of one GRPO
batch of N Wordle games through either TRL integration path (``environment_factory`` tools,
or ``Lockstep`` as ``vector_rollout_func`` drives it), ``aio`` the asyncio API
(``openenv_gym.aio.make_vec``; variant ``single``: one ``openenv_gym.aio.make`` session).
Method ``c`` and the official-client
rows of ``tool`` run under the OpenEnv interpreter: ``_openenv_side.py``.

Every worker speaks the line protocol of :mod:`_harness` on stdin/stdout.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from typing import Any

import gymnasium
import numpy as np
import psutil
from _harness import ActionPlan, RolloutBench, ToolCallBench, run_async_worker, run_worker

import openenv_gym
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.providers import LocalProvider
from openenv_gym.replies import reply_info
from openenv_gym.runtime.loader import load_env, resolve_models
from openenv_gym.spaces import codec_for

__all__ = ["InProcessEnv"]

gymnasium.register_envs(openenv_gym)

ENV_IDS = {"echo": "openenv/Echo-v0", "wordle": "openenv/Wordle-v0"}
BUSY_SPEC = "busy_env:BusyEnvironment"
PRIMARY_FIELD = {"echo": "echoed_message"}
"""The observation field the Gymnasium observation is made of (left out of ``info``)."""
RESET_SEED = 0


def _server_loop() -> str:
    """The event loop our servers run (``openenv-gym serve``: uvloop unless disabled)."""
    if os.environ.get("OPENENV_GYM_NO_UVLOOP", "").lower() in ("1", "true", "yes", "on"):
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


OUR_LOOPS = {"client_loop": "none (I/O on the caller's thread)", "server_loop": _server_loop()}
"""Which event loop each side of our methods ran, recorded in every row's ``params``."""


def _done(terminations: Any, truncations: Any) -> list[bool]:
    return np.logical_or(terminations, truncations).tolist()  # type: ignore[no-any-return]


class _VectorStepper:
    """Shared by every Gymnasium vector env method: one round is one ``step``."""

    envs: Any
    plan: ActionPlan
    n: int

    def round(self) -> int:
        _, _, terminations, truncations, _ = self.envs.step(tuple(self.plan.texts()))
        if self.plan.wordle:
            self.plan.update(_done(terminations, truncations))
        return self.n


class VectorBench(_VectorStepper):
    """(a), (b), shard: ``gymnasium.make_vec("openenv/...", num_envs=N, protocol=...)``.

    The local server(s) come from a :class:`LocalProvider` handed to ``make_vec``, so the
    worker knows their process ids (what the default ``provider="local"`` would start).
    """

    def __init__(
        self,
        env: str,
        n: int,
        protocol: str,
        num_servers: int = 1,
        server: str = "",
        provider: str = "local",
    ) -> None:
        self.env, self.n, self.protocol = env, n, protocol
        self.plan = ActionPlan(env, n)
        self.provider: Any
        if provider == "docker":  # one server process per container (issue: docker row)
            from openenv_gym.providers.docker import DockerProvider

            self.provider = DockerProvider(server or env, num_containers=num_servers)
        elif provider == "ray":  # Ray actors on the runner's cluster (RAY_ADDRESS)
            from openenv_gym.providers.ray import RayProvider

            passed = ("PYTHONPATH", "OPENENV_GYM_BENCH_BUSY_US")  # busy_env, on every node
            env_vars = {k: os.environ[k] for k in passed if k in os.environ}
            self.provider = RayProvider(
                server or env,
                num_servers=num_servers,
                placement="spread",
                runtime_env={"env_vars": env_vars},
            )
        else:
            self.provider = LocalProvider(server or env, num_servers=num_servers)
        self.envs: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            **OUR_LOOPS,
            "protocol": protocol,
            "num_servers": num_servers,
            "server": server or env,
            "autoreset": "next_step",
        }

    def setup(self) -> dict[str, Any]:
        self.envs = gymnasium.make_vec(
            ENV_IDS[self.env], num_envs=self.n, protocol=self.protocol, provider=self.provider
        )
        if isinstance(self.provider, LocalProvider):
            self.server_pids = self.provider.pids
        elif hasattr(self.provider, "containers"):
            self.server_pids = [
                c.attrs["State"]["Pid"] for c in self._reloaded(self.provider.containers)
            ]
        else:  # Ray actors: the server runs in the actor's worker process
            self.server_pids = [server.pid for server in self.provider.servers]
            self.params["nodes"] = len(set(self.provider.node_ids))
        self.params["protocols"] = list(self.envs.protocols)
        self.envs.reset(seed=RESET_SEED)
        return {}

    @staticmethod
    def _reloaded(containers: list[Any]) -> list[Any]:
        for container in containers:
            container.reload()
        return containers

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
        self.provider.close()


class AsyncVectorBench(_VectorStepper):
    """(d): ``gymnasium.vector.AsyncVectorEnv`` of N single envs (a process each), one server."""

    def __init__(self, env: str, n: int, context: str) -> None:
        self.env, self.n, self.context = env, n, context
        self.plan = ActionPlan(env, n)
        self.provider = LocalProvider(env)
        self.envs: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            **OUR_LOOPS,
            "protocol": "batch",
            "context": context,
            "shared_memory": False,
            "processes": n,
        }

    def setup(self) -> dict[str, Any]:
        url = self.provider.start()[0]
        self.server_pids = (
            self.provider.pids
            if isinstance(self.provider, LocalProvider)
            else [c.attrs["State"]["Pid"] for c in self._reloaded(self.provider.containers)]
        )
        make_one = functools.partial(
            gymnasium.make,
            ENV_IDS[self.env],
            base_url=url,
            protocol="batch",
            token=self.provider.token(0),
        )
        self.envs = gymnasium.vector.AsyncVectorEnv(
            [make_one] * self.n, shared_memory=False, context=self.context
        )
        self.envs.reset(seed=RESET_SEED)
        return {}

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
        self.provider.close()


class InProcessEnv(gymnasium.Env[Any, Any]):
    """One environment instance stepped directly, with our codec's conversions and no network.

    Does what a server plus :class:`~openenv_gym.env.OpenEnvEnv` do, minus the transport:
    validate the wire action into the env's action model, step, split the observation model
    into fields / reward / done / metadata as the batched reply does, then decode the
    Gymnasium observation and build ``info`` with the codec.
    """

    def __init__(self, env: str) -> None:
        factory = load_env(env)
        self._env = factory()
        self._action_model = resolve_models(factory).action
        self.codec = codec_for(env)
        self.observation_space = self.codec.observation_space
        self.action_space = self.codec.action_space
        self._primary = PRIMARY_FIELD.get(env)

    def _convert(self, obs: Any) -> tuple[Any, float, bool, dict[str, Any]]:
        fields = obs.model_dump(exclude={"reward", "done", "metadata"})
        reward = None if obs.reward is None else float(obs.reward)
        reply = ObservationReceived(fields, reward, bool(obs.done), obs.metadata or None)
        info = reply_info(reply, self._primary)
        return self.codec.decode_observation(fields), reward or 0.0, reply.done, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        obs, _, _, info = self._convert(self._env.reset(seed=seed))
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        wire = self._action_model.model_validate(self.codec.encode_action(action))
        obs, reward, done, info = self._convert(self._env.step(wire))
        return obs, reward, done, False, info

    def close(self) -> None:
        self._env.close()


class InProcessBench(_VectorStepper):
    """(e): ``gymnasium.vector.SyncVectorEnv`` of :class:`InProcessEnv`: the env's own cost."""

    def __init__(self, env: str, n: int) -> None:
        self.env, self.n = env, n
        self.plan = ActionPlan(env, n)
        self.envs: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {"autoreset": "next_step", "client_loop": "none"}

    def setup(self) -> dict[str, Any]:
        self.envs = gymnasium.vector.SyncVectorEnv(
            [functools.partial(InProcessEnv, self.env)] * self.n
        )
        self.envs.reset(seed=RESET_SEED)
        return {}

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()


class OpenBench:
    """open: against a running server, time ``make_vec(..., base_url=url)`` and the first reset.

    The server is started (and one session opened and closed, so it has loaded its word
    lists) before anything is timed. Each measurement opens N sessions from scratch and
    closes them afterwards, outside the timed part.
    """

    def __init__(self, env: str, n: int, protocol: str) -> None:
        self.env, self.n, self.protocol = env, n, protocol
        self.provider = LocalProvider(env)
        self.url = ""
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {**OUR_LOOPS, "protocol": protocol}

    def _open(self, n: int) -> Any:
        return gymnasium.make_vec(
            ENV_IDS[self.env],
            num_envs=n,
            base_url=self.url,
            protocol=self.protocol,
            token=self.provider.token(0),
        )

    def setup(self) -> dict[str, Any]:
        self.url = self.provider.start()[0]
        self.server_pids = (
            self.provider.pids
            if isinstance(self.provider, LocalProvider)
            else [c.attrs["State"]["Pid"] for c in self._reloaded(self.provider.containers)]
        )
        warm = self._open(1)
        try:
            warm.reset(seed=RESET_SEED)
        finally:
            warm.close()
        return {}

    def measure_once(self) -> dict[str, Any]:
        pc = time.perf_counter
        start = pc()
        envs = self._open(self.n)
        try:
            opened = pc()
            envs.reset(seed=RESET_SEED)
            reset = pc()
        finally:
            envs.close()
        return {
            "steps": 0,
            "rounds": 1,
            "elapsed": reset - start,
            "open_s": opened - start,
            "first_reset_s": reset - opened,
        }

    def close(self) -> None:
        self.provider.close()


class TrlToolBench(ToolCallBench):
    """tool (ours): one instance of ``environment_factory("openenv/Wordle-v0", ...)()``.

    As TRL uses it: the factory starts one shared local Wordle server, the instance owns one
    session; ``reset(seed=g)`` then ``guess(word=...)`` tool calls, each returning the text
    the model would read.
    """

    def __init__(self, protocol: str) -> None:
        super().__init__()
        self.protocol = protocol
        self.factory: Any = None
        self.env: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            **OUR_LOOPS,
            "client": "openenv_gym.integrations.trl.environment_factory, one instance",
            "server": "openenv-gym serve wordle (the factory's shared local server)",
        }

    def setup(self) -> dict[str, Any]:
        from openenv_gym.integrations.trl import environment_factory

        self.factory = environment_factory(ENV_IDS["wordle"], protocol=self.protocol)
        self.env = self.factory()
        # the factory's server is this worker's only child process
        self.server_pids = [c.pid for c in psutil.Process().children(recursive=True)]
        self.params["protocol"] = self.env.env.unwrapped.protocol
        self.params["tool"] = self.env.interface.tool_name
        return {}

    def _reset(self, seed: int) -> None:
        self.env.reset(seed=seed)

    def _guess(self, word: str) -> bool:
        self.env.guess(word=word)
        return bool(self.env.done)

    def close(self) -> None:
        if self.factory is not None:
            self.factory.close()


class ToolsRolloutBench(RolloutBench):
    """rollout ``tools``: N instances of ``environment_factory("openenv/Wordle-v0")()``.

    As ``GRPOTrainer(environment_factory=...)`` drives them: the instances (made once, in
    setup) share the factory's local server, each with its own session; a batch resets
    them one after the other (``reset(seed=..., prompt=[])``), then each turn makes one
    ``guess(word=...)`` tool call per game still playing, row by row.
    """

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.factory: Any = None
        self.instances: list[Any] = []
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            **OUR_LOOPS,
            "client": "openenv_gym.integrations.trl.environment_factory, N instances, "
            "called one after the other",
            "server": "openenv-gym serve wordle (the factory's shared local server)",
        }

    def setup(self) -> dict[str, Any]:
        from openenv_gym.integrations.trl import environment_factory

        self.factory = environment_factory(ENV_IDS["wordle"])
        self.instances = [self.factory() for _ in range(self.n)]
        # the factory's server is this worker's only child process
        self.server_pids = [c.pid for c in psutil.Process().children(recursive=True)]
        self.params["protocol"] = self.instances[0].env.unwrapped.protocol
        self.params["tool"] = self.instances[0].interface.tool_name
        return {}

    def _reset(self, seeds: list[int]) -> None:
        for instance, seed in zip(self.instances, seeds, strict=True):
            instance.reset(seed=seed, prompt=[])

    def _turn(self, playing: list[int], word: str) -> set[int]:
        ended = set()
        for i in playing:
            instance = self.instances[i]
            instance.guess(word=word)
            if instance.done:
                ended.add(i)
        return ended

    def close(self) -> None:
        self.instances = []
        if self.factory is not None:
            self.factory.close()


class LockstepRolloutBench(RolloutBench):
    """rollout ``lockstep``: :class:`Lockstep` over one vector env, as ``vector_rollout_func``.

    ``gymnasium.make_vec("openenv/Wordle-v0", num_envs=N, autoreset_mode="Disabled")``
    (made once, in setup; its default local server); a batch is ``lockstep.reset(seeds)``,
    then per turn one ``lockstep.step({i: "[word]"})`` over the games still playing.
    """

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.envs: Any = None
        self.lockstep: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            **OUR_LOOPS,
            "client": "openenv_gym.integrations.lockstep.Lockstep over make_vec(..., "
            'autoreset_mode="Disabled")',
            "server": "openenv-gym serve wordle (make_vec's local server)",
        }

    def setup(self) -> dict[str, Any]:
        from openenv_gym.integrations.lockstep import Lockstep

        self.envs = gymnasium.make_vec(
            ENV_IDS["wordle"], num_envs=self.n, autoreset_mode="Disabled"
        )
        self.lockstep = Lockstep(self.envs)
        # make_vec's local server is this worker's only child process
        self.server_pids = [c.pid for c in psutil.Process().children(recursive=True)]
        self.params["protocols"] = list(self.envs.unwrapped.protocols)
        return {}

    def _reset(self, seeds: list[int]) -> None:
        self.lockstep.reset(seeds)

    def _turn(self, playing: list[int], word: str) -> set[int]:
        answer = f"[{word}]"
        turns = self.lockstep.step(dict.fromkeys(playing, answer))
        return {i for i, turn in turns.items() if turn.terminated or turn.truncated}

    def close(self) -> None:
        self.lockstep = None
        if self.envs is not None:
            self.envs.close()


class AioVectorBench:
    """aio: ``await openenv_gym.aio.make_vec("openenv/...", num_envs=N, protocol="batch")``.

    The asyncio vector env, on the worker's asyncio loop; one round is one ``await
    envs.step(...)`` of N sub-envs, exactly as (a) steps the sync one (its local server
    from a :class:`LocalProvider`, NEXT_STEP autoreset).
    """

    def __init__(self, env: str, n: int) -> None:
        self.env, self.n = env, n
        self.plan = ActionPlan(env, n)
        self.provider = LocalProvider(env)
        self.envs: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            "client_loop": "asyncio (the caller's loop: openenv_gym.aio)",
            "server_loop": OUR_LOOPS["server_loop"],
            "protocol": "batch",
            "autoreset": "next_step",
        }

    async def setup(self) -> dict[str, Any]:
        import openenv_gym.aio

        self.envs = await openenv_gym.aio.make_vec(
            ENV_IDS[self.env], num_envs=self.n, protocol="batch", provider=self.provider
        )
        self.server_pids = self.provider.pids
        self.params["protocols"] = list(self.envs.protocols)
        await self.envs.reset(seed=RESET_SEED)
        return {}

    async def round(self) -> int:
        _, _, terminations, truncations, _ = await self.envs.step(tuple(self.plan.texts()))
        if self.plan.wordle:
            self.plan.update(_done(terminations, truncations))
        return self.n

    async def close(self) -> None:
        if self.envs is not None:
            await self.envs.close()
        self.provider.close()


class AioSingleBench:
    """aio ``single``: one ``await openenv_gym.aio.make("openenv/...", protocol="batch")``.

    One asyncio session (N=1); one round is one ``await env.step(...)``, or the reset of an
    ended episode (counted as an env-step, as every step method counts it).
    """

    def __init__(self, env: str) -> None:
        self.env = env
        self.plan = ActionPlan(env, 1)
        self.provider = LocalProvider(env)
        self.envs: Any = None
        self.done = False
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            "client_loop": "asyncio (the caller's loop: openenv_gym.aio)",
            "server_loop": OUR_LOOPS["server_loop"],
            "protocol": "batch",
            "client": "openenv_gym.aio.make: one AsyncOpenEnvEnv",
        }

    async def setup(self) -> dict[str, Any]:
        import openenv_gym.aio

        self.envs = await openenv_gym.aio.make(
            ENV_IDS[self.env], protocol="batch", provider=self.provider
        )
        self.server_pids = self.provider.pids
        await self.envs.reset(seed=RESET_SEED)
        return {}

    async def round(self) -> int:
        if self.done:
            await self.envs.reset()
            self.done = False
            self.plan.update([True])
            return 1
        _, _, terminated, truncated, _ = await self.envs.step(self.plan.texts()[0])
        self.done = bool(terminated or truncated)
        if not self.done:
            self.plan.update([False])
        return 1

    async def close(self) -> None:
        if self.envs is not None:
            await self.envs.close()
        self.provider.close()


def make_aio_bench(spec: dict[str, Any]) -> Any:
    """The bench of one cell of method ``aio`` (variant ``single``: one session)."""
    env, n = spec.get("env", "echo"), spec["n"]
    if spec.get("variant") == "single":
        return AioSingleBench(env)
    return AioVectorBench(env, n)


def make_bench(spec: dict[str, Any]) -> Any:
    """The bench of one cell: ``spec`` has ``method``, ``env``, ``n`` and the method's options."""
    method, env, n = spec["method"], spec.get("env", "echo"), spec["n"]
    if method == "a":
        return VectorBench(env, n, "batch")
    if method == "b":
        return VectorBench(env, n, "json")
    if method == "shard":
        return VectorBench("echo", n, "batch", spec["num_servers"], server=BUSY_SPEC)
    if method == "docker":
        return VectorBench(env, n, "batch", spec["num_servers"], provider=spec["provider"])
    if method == "ray":
        k, provider = spec["num_servers"], spec["provider"]
        if env == "busy":
            return VectorBench("echo", n, "batch", k, server=BUSY_SPEC, provider=provider)
        return VectorBench(env, n, "batch", k, provider=provider)
    if method == "d":
        return AsyncVectorBench(env, n, spec.get("context", "fork"))
    if method == "e":
        return InProcessBench(env, n)
    if method == "open":
        return OpenBench(env, n, spec["protocol"])
    if method == "tool":
        return TrlToolBench(spec["protocol"])
    if method == "rollout":
        variant = spec["variant"]
        if variant == "tools":
            return ToolsRolloutBench(n)
        if variant == "lockstep":
            return LockstepRolloutBench(n)
        raise ValueError(f"unknown rollout variant {variant!r}")
    raise ValueError(f"unknown method {method!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--method",
        required=True,
        choices=[
            "a",
            "b",
            "d",
            "e",
            "f",
            "shard",
            "open",
            "docker",
            "ray",
            "tool",
            "rollout",
            "aio",
        ],
    )
    args = parser.parse_args()
    if args.method == "aio":
        run_async_worker(make_aio_bench)
    elif args.method == "f":
        from _raw_ceiling import RawCeilingBench, have_uvloop

        run_async_worker(lambda spec: RawCeilingBench(spec["n"]), use_uvloop=have_uvloop())
    else:
        run_worker(make_bench)


if __name__ == "__main__":
    main()
