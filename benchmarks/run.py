"""Measure openenv-gym against its peers, in one run; write JSONL, Markdown and a PNG.

    python benchmarks/run.py                          # everything (about 20-30 minutes)
    python benchmarks/run.py --smoke                  # every method, tiny, under a minute
    python benchmarks/run.py --envs echo --n 64,256 --methods a,c,f --repeats 5 --duration 5
    python benchmarks/run.py --methods rollout        # env side of a GRPO batch, N=16,64,256

Methods (README.md defines them and every metric): (a) OpenEnvVectorEnv over the batched
protocol, (b) the same over OpenEnv's JSON /ws, (c) the official OpenEnv async client
(asyncio.gather over N sessions) against OpenEnv's own server hosting the same env logic,
(d) gymnasium AsyncVectorEnv of our single env, (e) SyncVectorEnv of the env logic in
process, (f) the raw msgpack-over-WebSocket ceiling; plus ``shard`` (a CPU-bound env over
1 vs 2 servers), ``open`` (time to open N Wordle sessions on a running server),
``tool`` (one Wordle tool call through our TRL integration vs the official client),
``rollout`` (the env side of one GRPO batch of N Wordle games: TRL tools vs lockstep) and
``aio`` (the asyncio API: ``openenv_gym.aio.make_vec``, and one ``aio.make`` session at N=1).

Each method runs in its own worker process, which speaks the small line protocol of
``_harness.py`` and opens each cell (env, N) afresh; this runner samples the CPU time of the
worker, of its children and of the servers (psutil) exactly around the worker's timed loop.
Method (c) and the official-client rows of ``tool`` run under a separate interpreter that
has ``openenv`` (``--openenv-python``); they are skipped, with a note, when there is none.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import json
import os
import platform
import queue
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
if BENCH_DIR not in sys.path:
    sys.path.insert(0, BENCH_DIR)

from _official_plan import OFFICIAL_WORKERS, derive_official, official_cells  # noqa: E402
from _report import METHODS, markdown  # noqa: E402

try:
    import psutil
except ImportError:  # pragma: no cover - a clear message beats a traceback
    sys.exit("benchmarks/run.py needs psutil: pip install psutil (or the `test` extra)")

SCHEMA_VERSION = 1
ROW_KEYS = (
    "schema_version",
    "run_id",
    "timestamp",
    "kind",
    "method",
    "label",
    "env",
    "N",
    "variant",
    "repeat",
    "steps",
    "rounds",
    "duration_s",
    "target_duration_s",
    "steps_per_s",
    "p50_ms",
    "p99_ms",
    "client_cpu_us_per_step",
    "server_cpu_us_per_step",
    "client_cpu_s",
    "server_cpu_s",
    "client_rss_mb",
    "server_rss_mb",
    "other_cpu",
    "busy_before",
    "open_s",
    "first_reset_s",
    "params",
    "versions",
    "host",
    "error",
)
"""Every row has exactly these keys (``None`` where a metric does not apply)."""

ALL_METHODS = ("a", "b", "c", "d", "e", "f", "shard", "open", "tool", "rollout", "aio")
# only when asked for: docker needs a Docker engine and the images; ray a loopback-only
# network namespace to start its two-node cluster in
OPTIONAL_METHODS = ("docker", "ray", "official")
STEP_METHODS = ("a", "b", "c", "d", "e", "aio")
OPENENV_METHODS = ("c", "tool", "official")  # need the OpenEnv interpreter (its official rows)
TOOL_VARIANTS = ("trl batch", "trl json", "official our-server", "official openenv-server")
"""Method tool: our TRL tool env over each protocol, the official sync client on each server."""
ROLLOUT_VARIANTS = ("tools", "lockstep")
"""Method rollout: TRL's environment_factory path, then vector_rollout_func's Lockstep."""
ROLLOUT_N = [16, 64, 256]
OPENENV_PYTHON_VAR = "OPENENV_GYM_BENCH_OPENENV_PYTHON"
DEFAULT_OPENENV_VENV = os.path.join(BENCH_DIR, ".venv-openenv")
DEFAULT_OPENENV_SPEC = "openenv==0.10.0"


# --------------------------------------------------------------------------- options


def _csv(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        return [kind(part) for part in text.split(",") if part.strip()]

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--smoke", action="store_true", help="N in {1,16}, 0.3 s, 1 repeat, no gate")
    p.add_argument("--envs", type=_csv(str), default=["echo", "wordle"], help="echo,wordle")
    p.add_argument("--n", type=_csv(int), default=None, help="default 1,16,64,256,1024,4096")
    p.add_argument(
        "--socket-max-n",
        type=int,
        default=1024,
        help="largest N for (b) and (c): one WebSocket per env (default 1024)",
    )
    p.add_argument(
        "--methods",
        type=_csv(str),
        default=list(ALL_METHODS),
        help="a,b,c,d,e,f,shard,open,tool,rollout,aio (and docker, ray: opt-in)",
    )
    p.add_argument("--repeats", type=int, default=None, help="measurements per cell (default 3)")
    p.add_argument("--duration", type=float, default=None, help="timed seconds each (default 3)")
    p.add_argument("--warmup", type=float, default=None, help="untimed seconds first (default 1)")
    p.add_argument(
        "--async-max-n", type=int, default=64, help="largest N for (d): a process per env"
    )
    p.add_argument("--async-context", default="fork", choices=["fork", "spawn", "forkserver"])
    p.add_argument("--shard-n", type=int, default=None, help="N of the sharding rows (default 256)")
    p.add_argument(
        "--docker-n", type=int, default=256, help="N of the docker rows (method docker, opt-in)"
    )
    p.add_argument(
        "--ray-n", type=int, default=None, help="N of the ray rows (method ray, opt-in; 256)"
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="measure the ray rows on this running cluster (default: start two local nodes)",
    )
    p.add_argument("--busy-us", type=float, default=100.0, help="CPU µs per step of the busy env")
    p.add_argument(
        "--official-images",
        type=_csv(str),
        default=[],
        help="method official: FAMILY=IMAGE,... (benchmarks/official_images.py builds them)",
    )
    p.add_argument(
        "--official-n",
        type=_csv(int),
        default=None,
        help="method official: N (default 1,64,256; 1,16 for envs not marked concurrent)",
    )
    p.add_argument("--open-n", type=int, default=None, help="sessions to open (default 256)")
    p.add_argument("--open-protocols", type=_csv(str), default=["batch", "json"])
    p.add_argument(
        "--rollout-n",
        type=_csv(int),
        default=None,
        help="games per rollout batch (default: --n when given, else 16,64,256; smoke 16)",
    )
    p.add_argument(
        "--openenv-python",
        default=None,
        help=f"interpreter with openenv + openenv-gym for (c), tool (env {OPENENV_PYTHON_VAR}; "
        f"default {os.path.relpath(DEFAULT_OPENENV_VENV, REPO_DIR)}, created if missing)",
    )
    p.add_argument("--openenv-spec", default=DEFAULT_OPENENV_SPEC, help="what to pip install")
    p.add_argument("--no-openenv-install", action="store_true", help="never create the venv")
    p.add_argument(
        "--openenv-loop",
        default="asyncio",
        choices=["auto", "asyncio", "uvloop"],
        help="uvicorn's loop for OpenEnv's servers (default asyncio: what OpenEnv's envs ship "
        "with; auto picks uvloop when installed, and openenv-gym installs it)",
    )
    p.add_argument("--quiet-frac", type=float, default=0.15, help="machine busy share to wait for")
    p.add_argument("--quiet-timeout", type=float, default=None, help="longest wait, s (0: no gate)")
    p.add_argument("--out-dir", default=os.path.join(BENCH_DIR, "results"))
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    smoke = args.smoke
    if args.rollout_n is None:  # --n when given, else the rollout's own sizes
        args.rollout_n = args.n or ([16] if smoke else list(ROLLOUT_N))
    defaults = {
        "n": [1, 16] if smoke else [1, 16, 64, 256, 1024, 4096],
        "repeats": 1 if smoke else 3,
        "duration": 0.3 if smoke else 3.0,
        "warmup": 0.1 if smoke else 1.0,
        "shard_n": 16 if smoke else 256,
        "ray_n": 16 if smoke else 256,
        "open_n": 16 if smoke else 256,
        "quiet_timeout": 0.0 if smoke else 30.0,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    unknown = set(args.methods) - set(ALL_METHODS) - set(OPTIONAL_METHODS)
    if unknown:
        p.error(f"unknown methods {sorted(unknown)}; choose from {','.join(ALL_METHODS)}")
    if set(args.envs) - {"echo", "wordle"}:
        p.error("--envs takes echo and/or wordle")
    if set(args.open_protocols) - {"batch", "json"}:
        p.error("--open-protocols takes batch and/or json")
    return args


# --------------------------------------------------------------------------- machine


def _busy_seconds() -> float:
    """CPU-seconds the whole machine has been busy (all cores)."""
    t = psutil.cpu_times()
    return (
        sum(t)
        - t.idle
        - getattr(t, "iowait", 0.0)
        - getattr(t, "guest", 0.0)
        - getattr(t, "guest_nice", 0.0)
    )


def wait_quiet(max_frac: float, timeout: float) -> float | None:
    """Wait until the machine is less than ``max_frac`` busy over 1 s, at most ``timeout`` s.

    Returns the last busy share measured (0..1 of all cores), None when the gate is off.
    """
    if timeout <= 0:
        return None
    cpus = os.cpu_count() or 1
    deadline = time.monotonic() + timeout
    while True:
        b0, t0 = _busy_seconds(), time.monotonic()
        time.sleep(1.0)
        frac = (_busy_seconds() - b0) / ((time.monotonic() - t0) * cpus)
        if frac <= max_frac or time.monotonic() >= deadline:
            return round(frac, 3)


def loopback_only() -> bool:
    """Whether this process's network namespace has no interface but ``lo``."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def raise_fd_limit() -> None:
    """1024 sessions need more than 1024 descriptors; children inherit the raised limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def host_info() -> dict[str, Any]:
    model = platform.processor() or ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
    }


def our_versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for dist in ("openenv-gym", "gymnasium", "websockets", "msgpack", "numpy", "uvloop", "psutil"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    git = subprocess.run(
        ["git", "-C", REPO_DIR, "describe", "--always", "--dirty", "--abbrev=12"],
        capture_output=True,
        text=True,
        check=False,
    )
    out["git"] = git.stdout.strip() or None
    return out


# --------------------------------------------------------------------------- the OpenEnv side


def probe_openenv(python: str) -> tuple[dict[str, Any] | None, str]:
    """(versions, "") when ``python`` can run method (c) (and tool's official rows)."""
    if not os.path.exists(python):
        return None, f"no interpreter at {python}"
    script = os.path.join(BENCH_DIR, "_openenv_side.py")
    try:
        done = subprocess.run(
            [python, script, "versions"], capture_output=True, text=True, timeout=180, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python} failed: {exc}"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"{python} cannot run the OpenEnv side: {tail}"
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if not info.get("ok"):
        return None, f"{python}: {info.get('problem')}"
    return info, ""


def create_openenv_venv(spec: str) -> None:
    print(
        f"creating {DEFAULT_OPENENV_VENV} with {spec} and openenv-gym (one time, minutes) ...",
        file=sys.stderr,
    )
    subprocess.run([sys.executable, "-m", "venv", DEFAULT_OPENENV_VENV], check=True)
    pip = os.path.join(DEFAULT_OPENENV_VENV, "bin", "python")
    subprocess.run(
        [pip, "-m", "pip", "install", "-q", "--disable-pip-version-check", spec, "-e", REPO_DIR],
        check=True,
    )


def resolve_openenv(args: argparse.Namespace) -> tuple[str | None, dict[str, Any] | None, str]:
    """(interpreter, its versions, why-not) for method (c) and tool's official rows."""
    explicit = args.openenv_python or os.environ.get(OPENENV_PYTHON_VAR)
    if explicit:
        info, why = probe_openenv(explicit)
        return (explicit if info else None), info, why
    python = os.path.join(DEFAULT_OPENENV_VENV, "bin", "python")
    if not os.path.exists(python):
        if args.smoke or args.no_openenv_install:
            return (
                None,
                None,
                (
                    f"no OpenEnv interpreter: pass --openenv-python or set {OPENENV_PYTHON_VAR} "
                    f"(a full run creates {os.path.relpath(DEFAULT_OPENENV_VENV, REPO_DIR)})"
                ),
            )
        try:
            create_openenv_venv(args.openenv_spec)
        except (OSError, subprocess.CalledProcessError) as exc:
            return None, None, f"creating the OpenEnv venv failed: {exc}"
    info, why = probe_openenv(python)
    return (python if info else None), info, why


# --------------------------------------------------------------------------- processes


def _stop_group(proc: subprocess.Popen[Any], grace: float) -> None:
    """Wait ``grace`` s for ``proc`` (a session leader we started), then TERM / KILL its group."""
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # local servers of the worker stop when its pipe closes; make sure of it
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(path: str, lines: int = 25) -> str:
    with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
        return "\n".join(f.read().strip().splitlines()[-lines:])
    return ""


class WorkerError(RuntimeError):
    """A worker reported an error (``reported``), died, or did not answer in time."""

    def __init__(self, message: str, *, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


class Worker:
    """One worker process (its own session, so Ctrl-C reaches only the runner)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: str) -> None:
        self.log = log
        self._log_file: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=env,
            cwd=REPO_DIR,
            start_new_session=True,
        )
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self._inbox.put(json.loads(line))
        self._inbox.put(None)

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerError(f"worker exited early\n{_tail(self.log)}") from None

    def expect(self, event: str, timeout: float) -> dict[str, Any]:
        try:
            message = self._inbox.get(timeout=timeout)
        except queue.Empty:
            raise WorkerError(f"no {event!r} from the worker within {timeout:.0f} s") from None
        if message is None:
            code = self.proc.wait()
            raise WorkerError(f"worker exited ({code}) before {event!r}\n{_tail(self.log)}")
        if message.get("event") == "error":
            raise WorkerError(message.get("message", "worker error"), reported=True)
        if message.get("event") != event:
            raise WorkerError(f"expected {event!r}, got {message}")
        return message

    def stop(self, grace: float = 60.0) -> None:
        """Close its input (it closes its bench and exits), then TERM / KILL its group."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        _stop_group(self.proc, grace=grace)
        self._log_file.close()


class OpenEnvServer:
    """OpenEnv's app (``_openenv_side.py serve``) under the OpenEnv interpreter."""

    def __init__(self, python: str, env: str, max_envs: int, loop: str, log: str) -> None:
        self.log = log
        self._log_file: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed in stop()
        argv = [
            python,
            os.path.join(BENCH_DIR, "_openenv_side.py"),
            "serve",
            "--env",
            env,
            "--max-concurrent-envs",
            str(max_envs),
            "--loop",
            loop,
        ]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            cwd=BENCH_DIR,
            start_new_session=True,
        )
        self.url = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = 180.0) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line.strip():
            raise WorkerError(f"the OpenEnv server printed no port\n{_tail(self.log)}")
        self.url = f"http://127.0.0.1:{int(line)}"
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply,
            ):
                if reply.status == 200:
                    return self.url
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise WorkerError(f"the OpenEnv server is not healthy at {self.url}\n{_tail(self.log)}")

    def stop(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        _stop_group(self.proc, grace=15)
        self._log_file.close()


# --------------------------------------------------------------------------- measurement


class Probe:
    """CPU time and RSS of the client processes and the servers, around one timed window."""

    def __init__(self, worker_pid: int, server_pids: list[int]) -> None:
        servers = [p for p in (_process(pid) for pid in server_pids) if p is not None]
        excluded = {p.pid for p in servers}
        for server in servers:
            with contextlib.suppress(psutil.Error):
                excluded.update(c.pid for c in server.children(recursive=True))
        root = psutil.Process(worker_pid)
        clients = [root]
        with contextlib.suppress(psutil.Error):
            clients += [c for c in root.children(recursive=True) if c.pid not in excluded]
        self.clients, self.servers = clients, servers
        self._self = psutil.Process()

    def start(self) -> None:
        self._c0 = _cpu(self.clients)
        self._s0 = _cpu(self.servers)
        self._me0 = _cpu([self._self])
        self._busy0 = _busy_seconds()
        self._t0 = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._t0
        busy = _busy_seconds() - self._busy0
        client = _delta(self._c0, _cpu(self.clients))
        server = _delta(self._s0, _cpu(self.servers))
        me = _delta(self._me0, _cpu([self._self]))
        cpus = os.cpu_count() or 1
        return {
            "client_cpu_s": client,
            "server_cpu_s": server if self.servers else None,
            "client_rss_mb": _rss_mb(self.clients),
            "server_rss_mb": _rss_mb(self.servers) if self.servers else None,
            "other_cpu": round(max(0.0, busy - client - (server or 0.0) - me) / (wall * cpus), 3),
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _process(pid: int) -> Any:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _cpu(procs: list[Any]) -> dict[int, float]:
    out = {}
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
    return out


def _delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(after[pid] - before[pid] for pid in before if pid in after)


def _rss_mb(procs: list[Any]) -> float:
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return round(total / 2**20, 1)


# --------------------------------------------------------------------------- plan


@dataclass
class Cell:
    """One (method, env, N, variant): ``repeats`` measurements by the method's worker."""

    method: str
    env: str
    n: int
    variant: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    """Method options sent to the worker with the cell (``num_servers``, ``protocol``...)."""
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.method if self.method in ("open", "tool", "rollout") else "step"

    @property
    def worker(self) -> str:
        """Which worker measures it: one per method, tool's official rows in their own."""
        if self.method == "tool" and self.variant.startswith("official"):
            return "tool-official"
        if self.method == "official":
            return OFFICIAL_WORKERS[self.variant]
        return self.method

    @property
    def openenv_server(self) -> bool:
        """Needs OpenEnv's own server (started by the runner before anything is measured)."""
        return self.method == "c" or self.variant == "official openenv-server"

    @property
    def name(self) -> str:
        variant = f" {self.variant}" if self.variant else ""
        return f"({self.method}) {self.env} N={self.n}{variant}"


def plan(
    args: argparse.Namespace, have_openenv: bool, why_not: str = ""
) -> tuple[list[Cell], list[str]]:
    """The cells of the run, N by N so peers are measured close in time; and skip notes."""
    cells: list[Cell] = []
    notes: list[str] = []
    methods = set(args.methods)
    for n in args.n:
        for env in args.envs:
            for method in STEP_METHODS:
                if method not in methods:
                    continue
                if method == "c" and not have_openenv:
                    continue
                if method == "d" and n > args.async_max_n:
                    continue
                if method in ("b", "c") and n > args.socket_max_n:
                    continue
                options = {"context": args.async_context} if method == "d" else {}
                cells.append(Cell(method, env, n, options=options))
                if method == "aio" and n == 1:  # the asyncio single env, next to (c) N=1
                    cells.append(Cell("aio", env, 1, "single", options={"variant": "single"}))
        if "f" in methods:
            cells.append(Cell("f", "raw", n))
    if "d" in methods and any(n > args.async_max_n for n in args.n):
        notes.append(f"(d) runs only for N <= {args.async_max_n}: it starts a process per env")
    if methods & {"b", "c"} and any(n > args.socket_max_n for n in args.n):
        notes.append(
            f"(b), (c) run only for N <= {args.socket_max_n}: a WebSocket per env "
            "(and for (c) a server thread per session)"
        )
    if "shard" in methods:
        for servers in (1, 2):
            cells.append(
                Cell(
                    "shard",
                    "busy",
                    args.shard_n,
                    variant=f"K={servers}",
                    options={"num_servers": servers},
                    params={"busy_us": args.busy_us},
                )
            )
    if "docker" in methods:  # the same batched stepping, 4 containers vs 4 local servers
        for provider in ("local", "docker"):
            cells.append(
                Cell(
                    "docker",
                    "wordle",
                    args.docker_n,
                    variant=f"{provider} K=4",
                    options={"num_servers": 4, "provider": provider},
                )
            )
    if "ray" in methods:  # K servers as Ray actors on a two-node cluster vs K local processes
        if loopback_only():
            for env in ("wordle", "busy"):
                for servers in (1, 2):
                    for provider in ("local", "ray"):
                        cells.append(
                            Cell(
                                "ray",
                                env,
                                args.ray_n,
                                variant=f"{provider} K={servers}",
                                options={"num_servers": servers, "provider": provider},
                                params={"busy_us": args.busy_us} if env == "busy" else {},
                            )
                        )
        else:
            notes.append(
                "(ray) skipped: it starts a Ray cluster, so run it in a loopback-only network "
                "namespace (benchmarks/README.md)"
            )
    if "open" in methods and "wordle" in args.envs:
        for protocol in args.open_protocols:
            cells.append(
                Cell(
                    "open", "wordle", args.open_n, variant=protocol, options={"protocol": protocol}
                )
            )
    if "tool" in methods and "wordle" in args.envs:
        for variant in TOOL_VARIANTS:
            official = variant.startswith("official")
            if official and not have_openenv:
                continue
            options = {"protocol": variant.split()[1]} if not official else {}
            cells.append(Cell("tool", "wordle", 1, variant=variant, options=options))
        if not have_openenv:
            notes.append(f"(tool) official-client rows skipped: {why_not or 'no openenv'}")
    if "official" in methods:
        specs, why = official_cells(args, have_openenv)
        cells += [Cell("official", o["family"], o["n"], o["variant"], options=o) for o in specs]
        notes += why
    if "rollout" in methods and "wordle" in args.envs:
        for n in args.rollout_n:  # both variants of one N back to back
            for variant in ROLLOUT_VARIANTS:
                cells.append(
                    Cell("rollout", "wordle", n, variant=variant, options={"variant": variant})
                )
    return cells, notes


# --------------------------------------------------------------------------- progress


class Progress:
    """tqdm when installed; else a status line on a terminal, or one line per result."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self._tty = sys.stderr.isatty()
        try:
            from tqdm import tqdm
        except ImportError:
            self._bar: Any = None
        else:
            self._bar = tqdm(total=total, unit="meas", dynamic_ncols=True)

    def _line(self, text: str, *, final: bool) -> None:
        if self._tty:
            sys.stderr.write(
                f"\r[{self.done}/{self.total}] {text[:100]:<100}" + ("\n" if final else "")
            )
        elif final:
            sys.stderr.write(f"[{self.done}/{self.total}] {text}\n")
        sys.stderr.flush()

    def status(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_description_str(text)
        else:
            self._line(text, final=False)

    def advance(self, text: str, count: int = 1) -> None:
        self.done += count
        if self._bar is not None:
            self._bar.update(count)
            self._bar.set_postfix_str(text)
        else:
            self._line(text, final=not self._tty)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            sys.stderr.write(("\r" if self._tty else "") + f"{text:<110}\n")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._tty:
            sys.stderr.write("\n")


# --------------------------------------------------------------------------- the run


class Run:
    """Runs the cells, writes rows as they come."""

    def __init__(
        self, args: argparse.Namespace, openenv_python: str | None, versions: dict[str, Any]
    ) -> None:
        self.args = args
        self.openenv_python = openenv_python
        self.versions = versions
        self.host = host_info()
        self.run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        os.makedirs(args.out_dir, exist_ok=True)
        self.jsonl = os.path.join(args.out_dir, f"{self.run_id}.jsonl")
        self.rows: list[dict[str, Any]] = []
        self.logs = tempfile.mkdtemp(prefix="openenv-gym-bench-")
        self.openenv_servers: dict[str, OpenEnvServer] = {}
        self.workers: dict[str, Worker] = {}
        self.env = dict(os.environ)
        # the shard worker's servers import busy_env from benchmarks/
        self.shard_env = dict(os.environ)
        self.shard_env["PYTHONPATH"] = os.pathsep.join(
            [BENCH_DIR, *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        self.shard_env["OPENENV_GYM_BENCH_BUSY_US"] = str(args.busy_us)
        self.ray_cluster: Worker | None = None
        self.failures = 0
        self.started = 0

    # ------------------------------------------------------------ rows
    def _row(self, cell: Cell, repeat: int, **values: Any) -> dict[str, Any]:
        row: dict[str, Any] = dict.fromkeys(ROW_KEYS)
        row.update(
            schema_version=SCHEMA_VERSION,
            run_id=self.run_id,
            timestamp=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            kind=cell.kind,
            method=cell.method,
            label=METHODS[cell.method],
            env=cell.env,
            N=cell.n,
            variant=cell.variant,
            repeat=repeat,
            target_duration_s=None if cell.kind == "open" else self.args.duration,
            versions=self.versions,
            host=self.host,
        )
        row.update(values)
        return row

    def _emit(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        with open(self.jsonl, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    # ------------------------------------------------------------ processes
    def start_openenv_servers(self, envs: list[str]) -> None:
        """Start OpenEnv's server for each env, all at once, before anything is measured."""
        assert self.openenv_python is not None
        # sessions of the previous cell close asynchronously: leave room
        max_envs = 2 * min(max(self.args.n), self.args.socket_max_n)
        for env in envs:
            self.openenv_servers[env] = OpenEnvServer(
                self.openenv_python,
                env,
                max_envs,
                self.args.openenv_loop,
                os.path.join(self.logs, f"openenv-server-{env}.log"),
            )
        for server in self.openenv_servers.values():
            server.wait_ready()

    def _worker(self, method: str) -> Worker:
        """The method's worker (``tool-official``: tool's official rows), started on first
        use (and again if it died)."""
        worker = self.workers.get(method)
        if worker is not None:
            if worker.proc.poll() is None:
                return worker
            self._drop_worker(method)
        self.started += 1
        if method in ("c", "tool-official"):
            assert self.openenv_python is not None
            mode = "client" if method == "c" else "tool-client"
            argv = [self.openenv_python, os.path.join(BENCH_DIR, "_openenv_side.py"), mode]
        elif method.startswith("official-"):  # _official.py client / ours / inproc
            mode = method.removeprefix("official-")
            python = self.openenv_python if mode == "client" else sys.executable
            assert python is not None
            argv = [python, os.path.join(BENCH_DIR, "_official.py"), mode]
        else:
            argv = [sys.executable, os.path.join(BENCH_DIR, "_methods.py"), "--method", method]
        log = os.path.join(self.logs, f"worker-{method}-{self.started}.log")
        env = self.shard_env if method in ("shard", "ray") else self.env
        worker = self.workers[method] = Worker(argv, env, log)
        return worker

    def _drop_worker(self, method: str) -> None:
        worker = self.workers.pop(method, None)
        if worker is not None:
            worker.stop(grace=5.0)

    def close(self, grace: float = 60.0) -> None:
        """Stop every worker (``grace`` s each to close its bench), then OpenEnv's servers."""
        workers, self.workers = list(self.workers.values()), {}
        for worker in workers:  # end of input: each closes its bench and exits
            with contextlib.suppress(OSError):
                if worker.proc.stdin is not None:
                    worker.proc.stdin.close()
        for worker in workers:
            worker.stop(grace)
        servers, self.openenv_servers = list(self.openenv_servers.values()), {}
        for server in servers:
            server.stop()
        if self.ray_cluster is not None:
            self.ray_cluster.stop(grace)
            self.ray_cluster = None

    def start_ray_cluster(self) -> None:
        """Start the two-node Ray cluster of the ``ray`` rows; its workers connect to it."""
        if self.args.ray_address:
            self.shard_env["RAY_ADDRESS"] = self.args.ray_address
            return
        log = os.path.join(self.logs, "ray-cluster.log")
        self.ray_cluster = Worker(
            [sys.executable, os.path.join(BENCH_DIR, "_ray_cluster.py")], self.shard_env, log
        )
        ready = self.ray_cluster.expect("ready", timeout=120.0)
        self.shard_env["RAY_ADDRESS"] = ready["address"]

    # ------------------------------------------------------------ cells
    def _spec(self, cell: Cell) -> tuple[dict[str, Any], list[int], dict[str, Any]]:
        """What the worker opens, server pids only the runner knows, extra params."""
        spec = {"method": cell.method, "env": cell.env, "n": cell.n, **cell.options}
        if cell.worker == "tool-official" and not cell.openenv_server:
            # our own Wordle server, started by the worker under our interpreter
            return {**spec, "server_python": sys.executable}, [], {}
        if not cell.openenv_server:
            return spec, [], {}
        server = self.openenv_servers[cell.env]
        side = self.versions.get("openenv_side") or {}
        loop = self.args.openenv_loop
        params = {
            "max_concurrent_envs": 2 * min(max(self.args.n), self.args.socket_max_n),
            "server_loop": side.get("uvicorn_loop_auto") if loop == "auto" else loop,
            "websocket_compression": "permessage-deflate (the client's default)",
        }
        return {**spec, "url": server.url}, [server.pid], params

    def fail_cells(
        self, cells: list[Cell], failed: list[Cell], message: str, progress: Progress
    ) -> list[Cell]:
        """Record ``failed`` as error rows; return the rest of ``cells``."""
        self.failures += len(failed)
        progress.note(f"FAILED {', '.join(c.name for c in failed)}: {message.splitlines()[0]}")
        for cell in failed:
            self._emit(self._row(cell, 0, params=cell.params, error=message[-4000:]))
            progress.advance(f"{cell.name} failed", self.args.repeats)
        return [c for c in cells if all(c is not f for f in failed)]

    def run_cell(self, cell: Cell, progress: Progress) -> None:
        args = self.args
        repeats = args.repeats
        measured = 0
        progress.status(f"{cell.name}: starting")
        worker = self._worker(cell.worker)
        opened = False
        try:
            spec, known_servers, params = self._spec(cell)
            worker.send(cmd="open", spec=spec)
            opened = True
            # official: containers of images that import OpenEnv, FastMCP and Gradio first
            first = 900.0 if cell.method == "official" else 180.0
            setup = worker.expect("setup", first + 0.3 * cell.n)
            server_pids = [*setup["server_pids"], *known_servers]
            params = {**cell.params, **setup.get("params", {}), **params, "warmup_s": args.warmup}
            for repeat in range(repeats):
                progress.status(f"{cell.name}: waiting for a quiet machine")
                busy_before = wait_quiet(args.quiet_frac, args.quiet_timeout)
                progress.status(f"{cell.name}: repeat {repeat + 1}/{repeats}")
                worker.send(cmd="measure", warmup=args.warmup, duration=args.duration)
                worker.expect("ready", args.warmup + 300.0)
                probe = Probe(worker.pid, server_pids)
                probe.start()
                worker.send(cmd="go")
                result = worker.expect("result", args.duration + 300.0)
                sample = probe.stop()
                self._emit(self._measurement(cell, repeat, result, sample, params, busy_before))
                measured += 1
                progress.advance(self._short(self.rows[-1]))
            worker.send(cmd="close")
            worker.expect("closed", 120.0)
        except WorkerError as exc:
            self.failures += 1
            message = str(exc)[-4000:]
            self._emit(self._row(cell, measured, params=cell.params, error=message))
            last = message.strip().splitlines()[-1] if message.strip() else "?"
            progress.note(f"FAILED {cell.name}: {last}")
            progress.advance(f"{cell.name} failed", repeats - measured)
            if not exc.reported:  # timed out or died: start the method's worker afresh
                self._drop_worker(cell.worker)
            elif opened:
                with contextlib.suppress(WorkerError):
                    worker.send(cmd="close")
                    worker.expect("closed", 120.0)

    def _measurement(
        self,
        cell: Cell,
        repeat: int,
        result: dict[str, Any],
        sample: dict[str, Any],
        params: dict[str, Any],
        busy_before: float | None,
    ) -> dict[str, Any]:
        steps = result["steps"]
        elapsed = result["elapsed"]

        def per_step(cpu: float | None) -> float | None:
            return None if cpu is None or not steps else cpu / steps * 1e6

        return self._row(
            cell,
            repeat,
            steps=steps,
            rounds=result["rounds"],
            duration_s=_round(elapsed, 4),
            steps_per_s=_round(steps / elapsed if steps else None, 1),
            p50_ms=_round(result.get("p50_ms"), 4),
            p99_ms=_round(result.get("p99_ms"), 4),
            client_cpu_us_per_step=_round(per_step(sample["client_cpu_s"]), 2),
            server_cpu_us_per_step=_round(per_step(sample["server_cpu_s"]), 2),
            client_cpu_s=_round(sample["client_cpu_s"], 3),
            server_cpu_s=_round(sample["server_cpu_s"], 3),
            client_rss_mb=sample["client_rss_mb"],
            server_rss_mb=sample["server_rss_mb"],
            other_cpu=sample["other_cpu"],
            busy_before=busy_before,
            open_s=_round(result.get("open_s"), 4),
            first_reset_s=_round(result.get("first_reset_s"), 4),
            params={**params, **result.get("params", {})},
        )

    @staticmethod
    def _short(row: dict[str, Any]) -> str:
        if row["kind"] == "open":
            return f"{row['method']} {row['env']} N={row['N']}: open {row['open_s']:.2f} s"
        if row["kind"] == "tool":
            return f"tool {row['variant']}: p50 {row['p50_ms']:.3f} ms"
        if row["kind"] == "rollout":
            return (
                f"rollout {row['variant']} N={row['N']}: "
                f"{row['rounds'] / row['duration_s']:,.2f} batches/s, "
                f"{row['steps_per_s']:,.0f} env-steps/s"
            )
        return f"{row['method']} {row['env']} N={row['N']}: {row['steps_per_s']:,.0f} steps/s"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Ctrl-C and SIGTERM stop the run in order (workers, then servers), even when the
    # runner was started with SIGINT ignored (a background job of a script)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    raise_fd_limit()
    versions = our_versions()
    openenv_python: str | None = None
    skipped = why = ""
    if set(OPENENV_METHODS) & set(args.methods):
        openenv_python, side, why = resolve_openenv(args)
        side = {k: v for k, v in (side or {}).items() if k not in ("ok", "problem")} or None
        versions["openenv"] = (side or {}).get("openenv")
        versions["openenv_side"] = side
        if openenv_python is None and "c" in args.methods:
            skipped = f"(c) skipped: {why}"
            print(skipped, file=sys.stderr)
    else:
        versions["openenv"] = None
        versions["openenv_side"] = None
    cells, notes = plan(args, openenv_python is not None, why)
    if skipped:
        notes.insert(0, skipped)
    for note in notes:
        print(note, file=sys.stderr)
    run = Run(args, openenv_python, versions)
    progress = Progress(len(cells) * args.repeats)
    interrupted = False
    try:
        openenv_envs = sorted({cell.env for cell in cells if cell.openenv_server})
        if openenv_envs:
            progress.status("starting OpenEnv's servers")
            try:
                run.start_openenv_servers(openenv_envs)
            except WorkerError as exc:
                failed = [c for c in cells if c.openenv_server]
                cells = run.fail_cells(cells, failed, f"OpenEnv server: {exc}", progress)
        if any(cell.method == "official" for cell in cells):
            progress.status("deriving the official images (cached)")
            failed = derive_official(cells, progress.note)
            if failed:
                cells = run.fail_cells(cells, failed, "cannot derive its image", progress)
        if any(cell.method == "ray" for cell in cells):
            progress.status("starting a two-node Ray cluster")
            try:
                run.start_ray_cluster()
            except WorkerError as exc:
                failed = [c for c in cells if c.method == "ray"]
                cells = run.fail_cells(cells, failed, f"Ray cluster: {exc}", progress)
        for cell in cells:
            run.run_cell(cell, progress)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress.close()
        run.close(grace=10.0 if interrupted else 60.0)
    if interrupted:
        print(f"interrupted: partial results in {run.jsonl}", file=sys.stderr)
        return 130
    stem = os.path.splitext(run.jsonl)[0]
    report = markdown(run.rows, title=f"openenv-gym benchmarks {run.run_id}", notes=notes)
    header = (
        f"{run.host['cpus']} CPUs ({run.host['cpu_model']}), python {versions['python']}, "
        f"openenv-gym {versions['openenv-gym']} ({versions['git']}), "
        f"openenv {versions['openenv']}; "
        f"{args.repeats} repeat(s) x {args.duration} s after {args.warmup} s warm-up.\n"
    )
    report = report.replace("\n\n", f"\n\n{header}\n", 1)
    with open(f"{stem}.md", "w", encoding="utf-8") as f:
        f.write(report)
    print(report)
    if not args.no_plot:
        from plot import plot

        if plot(run.rows, f"{stem}.png", title=f"openenv-gym benchmarks {run.run_id}"):
            print(f"plot: {stem}.png")
    print(f"rows: {run.jsonl}\ntable: {stem}.md")
    if run.failures:
        print(f"{run.failures} cell(s) failed; worker logs in {run.logs}", file=sys.stderr)
        return 1
    with contextlib.suppress(OSError):
        for name in os.listdir(run.logs):
            os.remove(os.path.join(run.logs, name))
        os.rmdir(run.logs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
