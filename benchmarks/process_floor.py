"""The least a process per session costs one step: a round trip to a worker, with no env.

An OpenEnv env not marked concurrent (``SUPPORTS_CONCURRENT_SESSIONS = False``: grid_world,
connect4, finqa, ...) never has two sessions in one process, so our runtime gives each
session a worker process and every step of it is a round trip to that worker. This
measures the floor of that round trip on this machine: the parent writes a 16-byte request
to each of N forked workers over a socketpair and reads their 16-byte replies, as the
runtime does for a batched step, minus the frame, the pickle and the env itself.

Prints, per N, the median over ``--repeats`` of the wall time per env-step (µs), and the
most a batched client could reach against an env whose step costs ``--env-us`` in process
(``env / (env + floor)``)::

    python benchmarks/process_floor.py
    python benchmarks/process_floor.py --workers 1 16 --env-us 11 36
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import time

MESSAGE = b"x" * 16


def _serve(sock: socket.socket) -> None:
    """A worker: echo each request until the parent closes its end."""
    while True:
        request = sock.recv(64)
        if not request:
            os._exit(0)
        sock.send(request)


def floor_us(workers: int, rounds: int, warmup: int = 200) -> float:
    """Wall µs per env-step of ``rounds`` batched round trips to ``workers`` processes."""
    pairs = [socket.socketpair() for _ in range(workers)]
    pids = []
    try:
        for i, (_, theirs) in enumerate(pairs):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                for j, (parent_end, worker_end) in enumerate(pairs):
                    parent_end.close()
                    if j != i:
                        worker_end.close()
                _serve(theirs)
            pids.append(pid)
        for _, theirs in pairs:
            theirs.close()
        ours = [mine for mine, _ in pairs]
        selector = selectors.DefaultSelector()
        for sock in ours:
            selector.register(sock, selectors.EVENT_READ)

        def step() -> None:
            for sock in ours:
                sock.send(MESSAGE)
            left = workers
            while left:
                for key, _ in selector.select():
                    key.fileobj.recv(64)  # type: ignore[union-attr]
                    left -= 1

        for _ in range(warmup):
            step()
        started = time.perf_counter()
        for _ in range(rounds):
            step()
        return (time.perf_counter() - started) / rounds / workers * 1e6
    finally:
        for mine, _ in pairs:
            mine.close()
        for pid in pids:
            os.waitpid(pid, 0)


def main(argv: list[str] | None = None) -> None:
    """Measure and print the floor per N."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--env-us",
        type=float,
        nargs="*",
        default=[11.0, 36.0],
        help="in-process step costs to compare with (default: grid_world's, connect4's)",
    )
    args = parser.parse_args(argv)
    for n in args.workers:
        samples = [floor_us(n, args.rounds) for _ in range(args.repeats)]
        median = statistics.median(samples)
        ceilings = ", ".join(
            f"{env:g} us env -> at most {env / (env + median):.2f}x in process"
            for env in args.env_us
        )
        print(f"N={n}: {median:.1f} us per env-step (median of {args.repeats}); {ceilings}")


if __name__ == "__main__":
    main()
