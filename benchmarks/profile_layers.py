"""Where each µs of a vector step goes, client and server, sampled with py-spy.

    python benchmarks/profile_layers.py                     # Echo, N=256, 8 s
    python benchmarks/profile_layers.py --env wordle --n 64 --seconds 10

Starts one local server, steps ``OpenEnvVectorEnv`` (batched protocol) in a child process,
and samples both processes with ``py-spy record`` (CPU samples only, no idle) while
measuring each one's CPU time with psutil. Every sample is charged to the layer of its
innermost frame (the file it runs in), and each layer's share of a process's CPU time is
divided by the steps taken: µs of CPU per env-step, per layer. Needs ``py-spy`` (the
``bench`` extra). Figures from one run are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

LAYERS = (  # (substring of the innermost frame's file, layer); first match wins
    ("openenv_gym/protocol/", "protocol (msgpack frames, columns)"),
    ("openenv_gym/transport/", "transport (sockets, dispatcher)"),
    ("openenv_gym/vector/", "vector env (bookkeeping, arrays)"),
    ("openenv_gym/infos.py", "infos"),
    ("openenv_gym/spaces/", "codecs (actions, observations)"),
    ("openenv_gym/runtime/http.py", "server connection layer"),
    ("openenv_gym/runtime/app.py", "server runtime (sessions, requests)"),
    ("openenv_gym/runtime/columns.py", "server reply columns"),
    ("openenv_gym_servers/wordle/gym.py", "codecs (actions, observations)"),
    ("openenv_gym_servers/echo/gym.py", "codecs (actions, observations)"),
    ("openenv_gym_servers/catch/gym.py", "codecs (actions, observations)"),
    ("openenv_gym_servers/", "the environment (game logic)"),
    ("servers/", "the environment (game logic)"),
    ("/websockets/", "websockets (framing)"),
    ("/msgpack/", "msgpack"),
    ("/pydantic", "pydantic (validation)"),
    ("/numpy/", "numpy"),
    ("/asyncio/", "event loop"),
    ("/uvloop/", "event loop"),
    ("/selectors.py", "waiting (select/poll)"),
)
ACTIONS = {"echo": "hello", "wordle": "[crane]"}


def _layer(frame: str) -> str:
    for part, layer in LAYERS:
        if part in frame:
            return layer
    return "other Python / C"


def _charge(folded: Path) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Samples per layer, and per innermost frame."""
    counts: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        leaf = stack.split(";")[-1]
        counts[_layer(leaf)] += int(count)
        leaves[leaf] += int(count)
    return counts, leaves


def client(url: str, env: str, n: int, seconds: float, out: Path) -> None:
    """The child: step for ``seconds`` after a warm-up, then write the step count."""
    import gymnasium

    import openenv_gym

    gymnasium.register_envs(openenv_gym)
    envs = gymnasium.make_vec(
        f"openenv/{env.capitalize()}-v0",
        num_envs=n,
        base_url=url,
        token=os.environ.get("OPENENV_GYM_TOKEN"),
    )
    actions = (ACTIONS[env],) * n
    envs.reset(seed=0)
    for _ in range(20):
        envs.step(actions)
    out.write_text("ready")
    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        envs.step(actions)
        steps += n
    out.write_text(str(steps))
    envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=sorted(ACTIONS), default="echo")
    parser.add_argument("--n", type=int, default=256, help="sub-envs (default 256)")
    parser.add_argument("--seconds", type=float, default=8.0, help="sampled seconds")
    parser.add_argument("--rate", type=int, default=997, help="py-spy samples per second")
    parser.add_argument("--detail", type=int, default=0, help="also list the top K frames")
    parser.add_argument("--child", nargs=2, metavar=("URL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        client(args.child[0], args.env, args.n, args.seconds, Path(args.child[1]))
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        sys.exit("needs py-spy: pip install 'openenv-gym[bench]'")
    from openenv_gym.providers import LocalProvider

    provider = LocalProvider(args.env, num_servers=1)
    try:
        url = provider.start()[0]
        process = provider.servers[0].process
        assert process is not None
        server = psutil.Process(process.pid)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "steps"
            token = provider.token(0)
            child_env = {**os.environ, **({"OPENENV_GYM_TOKEN": token} if token else {})}
            child = subprocess.Popen(
                [sys.executable, __file__, "--env", args.env, "--n", str(args.n),
                 "--seconds", str(args.seconds), "--child", url, str(out)],
                env=child_env,
            )  # fmt: skip
            while not out.exists() and child.poll() is None:
                time.sleep(0.05)
            if child.poll() is not None:
                sys.exit("the stepping child failed")
            me = psutil.Process(child.pid)
            cpu = {"client": me.cpu_times(), "server": server.cpu_times()}
            spies = {
                side: subprocess.Popen(
                    [
                        spy,
                        "record",
                        "-p",
                        str(p.pid),
                        "-d",
                        str(int(args.seconds - 1)),
                        "-r",
                        str(args.rate),
                        "-f",
                        "raw",
                        "-o",
                        str(Path(tmp) / side),
                        "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for side, p in (("client", me), ("server", server))
            }
            for spy_process in spies.values():
                spy_process.wait()
            after = {"client": me.cpu_times(), "server": server.cpu_times()}
            child.wait()
            steps = int(out.read_text())
            rate = steps / args.seconds
            print(f"{args.env} N={args.n}: {rate:,.0f} env-steps/s over {args.seconds:.0f} s")
            for side in ("client", "server"):
                used = sum(after[side][:2]) - sum(cpu[side][:2])
                window = args.seconds - 1
                per_step = used / (rate * window) * 1e6  # µs of CPU per env-step
                counts, leaves = _charge(Path(tmp) / side)
                total = sum(counts.values()) or 1
                print(f"\n{side}: {per_step:.2f} µs CPU per env-step ({total} samples)")
                print("| layer | µs/step | share |\n|---|---:|---:|")
                for layer, count in counts.most_common():
                    print(f"| {layer} | {per_step * count / total:.2f} | {count / total:.0%} |")
                if args.detail:
                    print("\ninnermost frames:")
                    for leaf, count in leaves.most_common(args.detail):
                        print(f"  {count / total:5.1%}  {leaf}")
    finally:
        provider.close()


if __name__ == "__main__":
    os.environ.setdefault("OPENENV_GYM_LOG_LEVEL", "WARNING")
    main()
