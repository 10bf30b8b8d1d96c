"""Method ``official``: upstream OpenEnv envs, as their images run them, four ways.

    python _official.py ours      # our client: "our json native", "our batch derived"
    python _official.py client    # the official async client (the OpenEnv interpreter)
    python _official.py inproc    # the env in process, in a container of its derived image
    python _official.py inside    # (run by inproc in that container)

Each is a benchmark worker (the :mod:`_harness` protocol). A cell's spec names the family
(``echo``, ``openspiel``, ``textarena``, ``grid_world``, ``reasoning_gym``, ``connect4``,
``finqa``), its official-like image (``official_images.py`` builds them from an upstream
checkout), N and the variant:

* ``official client native``: N ``GenericEnvClient`` sessions (async, ``asyncio.gather``
  per round) against the image's own server; a family not marked concurrent gets a
  container per session (upstream's server takes one session), else one container.
* ``our json native``: ``gymnasium.make_vec`` over the same containers, OpenEnv's JSON
  ``/ws`` (``DockerProvider(runtime="native")``).
* ``our batch derived``: ``gymnasium.make_vec`` with ``DockerProvider(image=...)``: ONE
  container of the derived image, our runtime, the batched protocol.
* ``in process``: the app's environment (recorded from its ``create_app``, as ``serve
  --app`` does), N instances stepped one after the other in one process,
  in a container of the derived image (the same Python and packages): the env's own cost.
  As OpenEnv's server calls them: the class's own ``step_async`` / ``reset_async`` awaited,
  else its ``step`` / ``reset``; ``reset`` given only the keyword arguments it takes; an MCP
  env's client held connected (its ``mcp_session()`` entered) for the session's life.

Every container gets the docker provider's limits (1 CPU, 1 GiB, 256 pids; more memory for
a family whose instances are large: ``memory_for``, the same on every side), but the derived
container of a family not marked concurrent, whose sessions are worker processes: it gets the
CPUs and memory of the native side's N containers (at most the machine's CPUs). A round is one
step of every sub-env; a sub-env whose episode ended is reset instead (NEXT_STEP), and its
action list starts over. The actions are fixed per family (:data:`PLANS`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from _harness import run_async_worker, run_worker

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))

VARIANTS = ("official client native", "our json native", "our batch derived", "in process")
CONNECT_CHUNK = 64
LIMITS = ["--memory", "1g", "--cpus", "1", "--pids-limit", "256"]
"""The docker provider's default limits (``DEFAULT_LIMITS``), for containers started here."""
HARDENING = [
    "--read-only",
    "--tmpfs",
    "/tmp:rw,nosuid,nodev,size=64m",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
]


WORDS = ("crane", "slate", "pious", "mound", "brick", "flint")
"""TextArena's Wordle: six distinct valid guesses, as the other methods play it."""


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


@dataclass(frozen=True)
class Plan:
    """What a family is stepped with.

    Attributes:
        env_id: Our Gymnasium id for it.
        actions: JSON actions, one per turn of an episode, cycled.
        concurrent: Whether its class is marked ``SUPPORTS_CONCURRENT_SESSIONS``.
        session_mib: Memory an instance holds, where it is large: a container hosting N
            sessions gets ``memory_for`` (TextArena's Wordle holds ~22 MiB an instance
            with the stub corpus, so 64 outgrow the provider's 1 GiB: the container dies).
        build_s: Seconds an instance may take to build, where that is long: opening N
            sessions may take ``open_timeout`` on every side (TextArena's Wordle parses
            its English word lists in each instance: ~1 s of CPU, one after the other
            under the GIL, so N=256 outlasts the clients' default 10 s / 60 s waits).
    """

    env_id: str
    actions: tuple[dict[str, Any], ...]
    concurrent: bool = True
    session_mib: int = 0
    build_s: float = 0.0


PLANS: dict[str, Plan] = {
    "echo": Plan("openenv/Echo-v0", (_call("echo_message", message="[crane]"),)),
    "openspiel": Plan("openenv/Catch-v0", ({"action_id": 1},)),
    "textarena": Plan(
        "openenv/Wordle-v0",
        tuple({"message": f"[{w}]"} for w in WORDS),
        session_mib=32,
        build_s=3.0,
    ),
    "grid_world": Plan(
        "openenv/Generic-v0", ({"action": "RIGHT"}, {"action": "DOWN"}), concurrent=False
    ),
    "reasoning_gym": Plan("openenv/Generic-v0", ({"answer": "4"},)),
    "connect4": Plan(
        "openenv/Generic-v0", tuple({"column": c} for c in range(7)), concurrent=False
    ),
    "finqa": Plan(
        "openenv/Generic-v0",
        (
            _call("get_descriptions", company_name="acme"),
            _call("get_table_info", company_name="acme", table_name="revenue"),
            _call(
                "sql_query",
                company_name="acme",
                table_name="revenue",
                query="SELECT segment FROM revenue WHERE segment LIKE 'c%'",
            ),
        ),
        concurrent=False,
    ),
}


def memory_for(family: str, sessions: int) -> int:
    """MiB for a container hosting ``sessions`` of the family: 1 GiB (the provider's
    default) or, for a family whose instances are large, 512 MiB plus theirs, if more."""
    return max(1024, 512 + sessions * PLANS[family].session_mib)


def open_timeout(family: str, n: int) -> float:
    """Seconds to wait for N sessions to open (connect, handshake, the first reply)."""
    return 60.0 + n * PLANS[family].build_s


def containers_for(family: str, n: int) -> int:
    """Native containers for N sessions: one per session unless the env is concurrent."""
    return 1 if PLANS[family].concurrent else n


class Turns:
    """Each sub-env's turn in its episode (NEXT_STEP: after an end, a reset, then turn 0)."""

    def __init__(self, n: int) -> None:
        self.turn = [0] * n
        self.resetting = [False] * n

    def ended(self, done: list[bool]) -> None:
        """After a round: ``done`` says which stepped sub-envs ended their episode."""
        turn, resetting = [], []
        for t, d, r in zip(self.turn, done, self.resetting, strict=True):
            turn.append(0 if r or d else t + 1)
            resetting.append(d and not r)
        self.turn, self.resetting = turn, resetting


# --------------------------------------------------------------------------- containers


def _docker(*args: str, timeout: float = 120.0) -> str:
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _labels() -> list[str]:
    labels = {
        "openenv-gym.managed": "1",
        "openenv-gym.owner": str(os.getpid()),
        "openenv-gym.host": socket.gethostname(),
    }
    return [arg for k, v in labels.items() for arg in ("--label", f"{k}={v}")]


def container_pids(ids: list[str]) -> list[int]:
    """Host pids of every process in the containers (their servers and workers)."""
    pids: list[int] = []
    for cid in ids:
        out = _docker("top", cid, "-eo", "pid")
        pids += [int(line) for line in out.splitlines()[1:] if line.strip().isdigit()]
    return pids


class NativeContainers:
    """K containers of an image's own server, started with the docker CLI (the OpenEnv
    interpreter has no docker SDK), published on 127.0.0.1, with the provider's limits.

    ``sessions`` sessions in all: OpenEnv's server runs each in a thread of its own, so the
    pid limit grows with them (256 threads would hit the provider's default of 256 pids).
    """

    def __init__(self, image: str, count: int, sessions: int, memory_mib: int = 1024) -> None:
        self.image, self.count, self.sessions = image, count, sessions
        self.memory_mib = memory_mib
        self.ids: list[str] = []
        self.urls: list[str] = []
        self.closed = False

    def start(self) -> None:
        """Start them and wait until each answers ``/health`` (run in a thread)."""
        pids = str(max(256, 64 + 2 * self.sessions))
        limits = ["--memory", f"{self.memory_mib}m", *LIMITS[2:-1], pids]
        for _ in range(self.count):
            if self.closed:
                return
            cid = _docker(
                "run", "-d", "-p", "127.0.0.1::8000", *limits, *HARDENING, *_labels(),
                "-e", f"MAX_CONCURRENT_ENVS={self.sessions}", self.image,
            )  # fmt: skip
            self.ids.append(cid)
            port = _docker("port", cid, "8000/tcp").splitlines()[0].rsplit(":", 1)[1]
            self.urls.append(f"http://127.0.0.1:{port}")
        for url in self.urls:
            _wait_healthy(url, 300.0, self)

    def close(self) -> None:
        self.closed = True
        if self.ids:
            subprocess.run(["docker", "rm", "-f", *self.ids], capture_output=True, check=False)
            self.ids = []


def _wait_healthy(url: str, timeout: float, owner: NativeContainers) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not owner.closed:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not healthy within {timeout} s")


# --------------------------------------------------------------------------- official client


class OfficialClientBench:
    """N ``GenericEnvClient`` sessions over the native containers, one gather a round."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.family, self.n, self.image = spec["family"], spec["n"], spec["image"]
        self.plan = PLANS[self.family]
        self.turns = Turns(self.n)
        self.native: NativeContainers | None = None
        self.clients: list[Any] = []
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            "client": "openenv.core.generic_client.GenericEnvClient (async)",
            "client_loop": "asyncio (the official async client's)",
            "containers": containers_for(self.family, self.n),
            "image": self.image,
        }

    async def setup(self) -> dict[str, Any]:
        from openenv.core.generic_client import GenericEnvClient

        k = containers_for(self.family, self.n)
        # made first, so that close() removes what a start cut short has started
        memory = memory_for(self.family, -(-self.n // k))
        self.native = NativeContainers(self.image, k, self.n + 8, memory)
        self.params["memory_mib"] = memory
        await asyncio.to_thread(self.native.start)
        urls = self.native.urls
        wait = open_timeout(self.family, self.n)
        self.clients = [
            GenericEnvClient(base_url=urls[i % k], connect_timeout_s=wait, message_timeout_s=wait)
            for i in range(self.n)
        ]
        for start in range(0, self.n, CONNECT_CHUNK):
            chunk = self.clients[start : start + CONNECT_CHUNK]
            await asyncio.gather(*(c.connect() for c in chunk))
        await asyncio.gather(*(c.reset(seed=i) for i, c in enumerate(self.clients)))
        self.server_pids = container_pids(self.native.ids)
        return {}

    async def round(self) -> int:
        actions, turns, resetting = self.plan.actions, self.turns.turn, self.turns.resetting
        results = await asyncio.gather(
            *(
                client.reset() if resetting[i] else client.step(actions[turns[i] % len(actions)])
                for i, client in enumerate(self.clients)
            )
        )
        self.turns.ended([not resetting[i] and bool(r.done) for i, r in enumerate(results)])
        return self.n

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)
        if self.native is not None:
            self.native.close()


# --------------------------------------------------------------------------- our client


def gym_action(codec: Any, action: dict[str, Any]) -> Any:
    """The Gymnasium action our codec encodes as the JSON ``action`` (checked)."""
    tools = getattr(codec, "tool_actions", None)
    space = codec.action_space
    if tools is not None and "tool" in getattr(space, "spaces", {}):
        names = [t.name for t in tools.tools]
        name = action["tool_name"]
        made: Any = {"tool": names.index(name)}
        if "arguments" in space.spaces and name in space["arguments"].spaces:
            made["arguments"] = {name: _fields(space["arguments"][name], action["arguments"])}
    elif codec.name in ("echo", "wordle"):
        made = action.get("message") or action["arguments"]["message"]
    elif codec.name == "catch":
        made = int(action["action_id"])
    elif hasattr(space, "spaces"):
        made = _fields(space, action)
    else:  # one field (the schema's only required one): the action is its value
        (key,) = codec.encode_action(space.sample())
        made = _value(space, action[key], lambda v: codec.encode_action(v)[key])
    sent = codec.encode_action(made)
    if any(sent.get(k) != v for k, v in action.items() if k in sent):
        raise ValueError(f"the action {made!r} encodes as {sent}, not {action}")
    return made


def _fields(space: Any, values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, sub in space.spaces.items():
        out[key] = _value(sub, values.get(key), None)
    return out


def _value(space: Any, value: Any, encode: Any) -> Any:
    import numpy as np
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):  # an enum or a bounded integer
        for i in range(int(space.start), int(space.start + space.n)):
            if encode is not None and encode(np.int64(i)) == value:
                return np.int64(i)
            if encode is None and (value == i or str(value) == str(i)):
                return np.int64(i)
        raise ValueError(f"{value!r} is not in {space}")
    if isinstance(space, spaces.Box):
        return np.asarray(value, dtype=space.dtype)
    return value


class OursBench:
    """``gymnasium.make_vec`` over the native containers (JSON) or one derived one (batch)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import gymnasium

        import openenv_gym

        gymnasium.register_envs(openenv_gym)
        self.family, self.n, self.image = spec["family"], spec["n"], spec["image"]
        self.variant = spec["variant"]
        self.plan = PLANS[self.family]
        self.turns = Turns(self.n)
        self.envs: Any = None
        self.provider: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {"client_loop": "none (I/O on the caller's thread)"}

    def setup(self) -> dict[str, Any]:
        import gymnasium

        from openenv_gym.providers.docker import DockerProvider

        native = self.variant == "our json native"
        sessions = max(self.n + 8, 16)
        if native:
            k = containers_for(self.family, self.n)
            pids = max(256, 64 + 2 * sessions)  # OpenEnv's server: a thread per session
            self.provider = DockerProvider(
                image=self.image,
                runtime="native",
                num_containers=k,
                max_sessions=sessions,
                limits={
                    "pids_limit": pids,
                    "mem_limit": f"{memory_for(self.family, -(-self.n // k))}m",
                },
            )
        else:  # the native side's budget: a family not marked concurrent gets K containers
            k = min(containers_for(self.family, self.n), os.cpu_count() or 1)
            memory = max(1024 * k, memory_for(self.family, self.n))
            self.provider = DockerProvider(
                image=self.image,
                runtime="openenv-gym",
                max_sessions=sessions,
                limits={"nano_cpus": k * 1_000_000_000, "mem_limit": f"{memory}m"},
            )
            self.params["cpus"] = k
        self.envs = gymnasium.make_vec(
            self.plan.env_id,
            num_envs=self.n,
            provider=self.provider,
            protocol="json" if native else "batch",
            timeouts={"connect": open_timeout(self.family, self.n)}
            | ({"step": open_timeout(self.family, self.n)} if self.plan.build_s else {}),
        )
        codec = self.envs.unwrapped.codec
        self.actions = [gym_action(codec, a) for a in self.plan.actions]
        self.envs.reset(seed=0)
        self.server_pids = container_pids([c.id for c in self.provider.containers])
        self.params.update(
            protocols=list(self.envs.unwrapped.protocols),
            containers=len(self.provider.containers),
            image=self.provider.launch.image,
        )
        return {}

    def round(self) -> int:
        actions, turns = self.actions, self.turns.turn
        batch = tuple(actions[t % len(actions)] for t in turns)
        _, _, terminated, truncated, _ = self.envs.step(batch)
        done = [bool(a or b) for a, b in zip(terminated, truncated, strict=True)]
        # NEXT_STEP: the vector env resets an ended sub-env on the next step by itself (its
        # action then goes unused), so turn -1 is that reset and turn 0 the first step
        self.turns.turn = [-1 if d else t + 1 for t, d in zip(turns, done, strict=True)]
        return self.n

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
        if self.provider is not None:
            self.provider.close()


# --------------------------------------------------------------------------- in process


class InsideBench:
    """Runs in a container of the derived image: the app's env, N instances, in process."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.family, self.n = spec["family"], spec["n"]
        self.serve: list[str] = spec["serve"]
        self.plan = PLANS[self.family]
        self.turns = Turns(self.n)
        self.loop = asyncio.new_event_loop()
        self.envs: list[Any] = []
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {"stepped": "one instance after another, in process"}

    def setup(self) -> dict[str, Any]:
        from openenv_gym.runtime.apps import AppTarget, load_app

        flag, where = self.serve[self.serve.index("serve") + 1 : self.serve.index("serve") + 3]
        target = AppTarget.parse(where) if flag == "--app" else AppTarget.from_dir(where)
        target.enter()
        app, _ = load_app(target)
        self.actions = [app.action.model_validate(a) for a in self.plan.actions]
        self.envs = [app.env() for _ in range(self.n)]
        self.loop.run_until_complete(self._hold_mcp_sessions())
        self.loop.run_until_complete(self._reset_all())
        self.params["env"] = app.name
        return {}

    async def _hold_mcp_sessions(self) -> None:
        """As OpenEnv's server does for a session's life: an MCP env's client stays
        connected (its ``mcp_session()`` entered), so a tool call does not connect anew."""
        self.closing = asyncio.Event()
        self.holders: list[asyncio.Task[None]] = []
        entered = []
        for env in self.envs:
            opener = getattr(env, "mcp_session", None)
            if callable(opener) and getattr(env, "mcp_client", None) is not None:
                future: asyncio.Future[None] = self.loop.create_future()
                self.holders.append(self.loop.create_task(self._hold(opener, future)))
                entered.append(future)
        if entered:
            await asyncio.gather(*entered)
        self.params["mcp_sessions_held"] = len(entered)

    async def _hold(self, opener: Any, entered: asyncio.Future[None]) -> None:
        async with opener():  # one task enters and leaves it (anyio's cancel scopes)
            entered.set_result(None)
            await self.closing.wait()

    async def _reset_all(self) -> None:
        for i, env in enumerate(self.envs):
            await self._reset(env, seed=i)

    @staticmethod
    def _own(env: Any, name: str) -> bool:
        """Whether the class has its own ``name`` (``step_async``), not OpenEnv's default."""
        from openenv.core.env_server.interfaces import Environment

        return getattr(type(env), name, None) is not getattr(Environment, name, None)

    async def _reset(self, env: Any, **kwargs: Any) -> Any:
        """As a server resets: only the kwargs ``reset`` takes (OpenSpiel's takes no seed);
        the env's own ``reset_async`` awaited, else its ``reset`` called."""
        takes = inspect.signature(env.reset).parameters
        kwargs = {k: v for k, v in kwargs.items() if k in takes}
        if self._own(env, "reset_async"):
            return await env.reset_async(**kwargs)
        return env.reset(**kwargs)

    async def _step(self, env: Any, action: Any) -> Any:
        if self._own(env, "step_async"):  # MCP envs: their tool calls are coroutines
            return await env.step_async(action)
        return env.step(action)

    async def _round(self) -> list[bool]:
        actions, turns, resetting = self.actions, self.turns.turn, self.turns.resetting
        done = []
        for i, env in enumerate(self.envs):
            if resetting[i]:
                await self._reset(env)
                done.append(False)
            else:
                obs = await self._step(env, actions[turns[i] % len(actions)])
                done.append(bool(obs.done))
        return done

    def round(self) -> int:
        self.turns.ended(self.loop.run_until_complete(self._round()))
        return self.n

    def close(self) -> None:
        holders = getattr(self, "holders", [])
        if holders:
            self.closing.set()
            self.loop.run_until_complete(asyncio.gather(*holders, return_exceptions=True))
        for env in self.envs:
            close = getattr(env, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as exc:  # an env that cannot close: the cell is over anyway
                    print(f"closing {type(env).__name__}: {exc!r}", file=sys.stderr)
        self.loop.close()


class Relay:
    """The ``inproc`` worker: derives the image, then runs ``inside`` in a container of it
    and passes the protocol lines through (the container's pids become the server pids)."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.name = ""

    def serve(self) -> None:
        out = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)
        try:
            for line in sys.stdin.buffer:
                cmd = json.loads(line)
                if cmd["cmd"] == "quit":
                    break
                if cmd["cmd"] == "open":
                    self._stop()
                    try:
                        self._start(cmd["spec"])
                    except Exception as exc:
                        out.write(_event("error", message=f"inproc: {exc!r}"))
                        continue
                    cmd["spec"]["serve"] = self.serve_args
                    line = (json.dumps(cmd) + "\n").encode()
                assert self.child is not None
                assert self.child.stdin is not None
                assert self.child.stdout is not None
                self.child.stdin.write(line)
                self.child.stdin.flush()
                if cmd["cmd"] == "measure":  # ready, then (after go) result: two replies
                    out.write(self.child.stdout.readline())
                    go = sys.stdin.buffer.readline()
                    self.child.stdin.write(go)
                    self.child.stdin.flush()
                reply = self.child.stdout.readline()
                if cmd["cmd"] == "open" and reply:
                    event = json.loads(reply)
                    if event.get("event") == "setup":
                        event["server_pids"] = container_pids([self.name])
                        reply = (json.dumps(event) + "\n").encode()
                out.write(reply or _event("error", message="the in-process container died"))
                if cmd["cmd"] == "close":
                    self._stop()
        finally:
            self._stop()

    def _start(self, spec: dict[str, Any]) -> None:
        from openenv_gym.providers.derive import derive

        derived = derive(spec["image"])
        self.serve_args = list(derived.serve)
        self.name = f"openenv-gym-bench-inproc-{os.getpid()}"
        memory = memory_for(spec["family"], spec["n"])
        python = derived.serve[0]
        self.child = subprocess.Popen(
            [
                "docker", "run", "-i", "--rm", "--name", self.name, "--network", "none",
                "--memory", f"{memory}m", *LIMITS[2:], *HARDENING, *_labels(),
                "-v", f"{BENCH_DIR}:/bench:ro",
                "--entrypoint", python, derived.image, "/bench/_official.py", "inside",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )  # fmt: skip

    def _stop(self) -> None:
        if self.child is not None:
            subprocess.run(["docker", "rm", "-f", self.name], capture_output=True, check=False)
            self.child.wait()
            self.child = None


def _event(name: str, **fields: Any) -> bytes:
    return (json.dumps({"event": name, **fields}) + "\n").encode()


def main() -> None:
    mode = sys.argv[1]
    if mode == "client":
        run_async_worker(OfficialClientBench)
    elif mode == "ours":
        run_worker(OursBench)
    elif mode == "inside":
        run_worker(InsideBench)
    elif mode == "inproc":
        threading.current_thread().name = "relay"
        Relay().serve()
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
