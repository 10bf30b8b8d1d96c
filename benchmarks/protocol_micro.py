"""One request/reply round trip through the sans-I/O protocol objects only: no sockets.

Measures the CPU cost of the protocol layer itself (``openenv_gym.protocol``): the client
encodes a request, the server parses it and answers, the client parses the answer. Three
cases, each at N=1 and N=256 slots (JSON: one session, N ignored):

* ``batch-v1``: ``BatchClient.send_step`` with one action map per slot, the server answers
  with ``send_results`` (one ``SlotResult`` per slot);
* ``batch-v2``: version 2, the actions as one column, the server answers with
  ``send_table`` (observations as columns);
* ``json``: ``ClientSession.send_step`` / ``ServerSession.send_observation``.

Prints the median and the least CPU time of one round trip (in µs; CPU time of this
process, so that other load on the machine matters less than for wall time) over
``--repeats`` samples of ``--number`` round trips each::

    python benchmarks/protocol_micro.py
    python benchmarks/protocol_micro.py --repeats 31 --number 2000
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any

import numpy as np

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op


def _batch_pair(version: int, n: int) -> tuple[bp.BatchClient, bp.BatchServer]:
    """A client and a server wired in memory, hello done and slots 0..n-1 open."""
    client, server = bp.BatchClient("bench", version=version), bp.BatchServer(version=version)
    client.send_hello()
    client.send_open(range(n))
    for frame in client.data_to_send():
        server.receive_data(frame)
    for event in server.events_received():
        if isinstance(event, bp.HelloRequestReceived):
            server.send_hello(server="bench", env="echo", max_slots=n)
        else:
            server.send_results(event, [None] * n)
    for frame in server.data_to_send():
        client.receive_data(frame)
    client.events_received()
    return client, server


def _step_round_trip(
    client: bp.BatchClient,
    server: bp.BatchServer,
    send: Callable[[], object],
    answer: Callable[[Any], None],
) -> Callable[[], None]:
    """One step request through both protocol objects and its reply back (``answer``)."""

    def round_trip() -> None:
        send()
        for frame in client.data_to_send():
            server.receive_data(frame)
        for event in server.events_received():
            answer(event)
        for frame in server.data_to_send():
            client.receive_data(frame)
        client.events_received()

    return round_trip


def batch_v1(n: int) -> Callable[[], None]:
    """One step round trip, per-slot maps both ways."""
    client, server = _batch_pair(1, n)
    slots = list(range(n))
    actions = [{"message": "[crane]"}] * n
    results = [bp.SlotResult({"echoed_message": "[crane]"}, 0.0, False)] * n
    return _step_round_trip(
        client,
        server,
        lambda: client.send_step(slots, actions),
        lambda event: server.send_results(event, results),
    )


def batch_v2(n: int) -> Callable[[], None]:
    """One step round trip, actions and observations as columns."""
    client, server = _batch_pair(2, n)
    slots = list(range(n))
    actions = {"message": ["[crane]"] * n}
    table = bp.ResultTable(
        {"echoed_message": ["[crane]"] * n}, np.zeros(n), np.zeros(n, dtype=bool)
    )
    return _step_round_trip(
        client,
        server,
        lambda: client.send_step(slots, actions),
        lambda event: server.send_table(event, table),
    )


def json_session(n: int) -> Callable[[], None]:
    """One step round trip on one JSON /ws session (``n`` is ignored)."""
    client, server = op.ClientSession(), op.ServerSession()
    action = {"message": "[crane]"}
    observation = {"echoed_message": "[crane]"}

    def round_trip() -> None:
        client.send_step(action)
        for frame in client.data_to_send():
            server.receive_data(frame)
        server.events_received()
        server.send_observation(observation, 0.0, False)
        for frame in server.data_to_send():
            client.receive_data(frame)
        client.events_received()

    return round_trip


CASES = {"batch-v1": batch_v1, "batch-v2": batch_v2, "json": json_session}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="samples (median taken)")
    parser.add_argument("--number", type=int, default=0, help="round trips per sample")
    parser.add_argument("--n", default="1,256", help="slot counts, comma-separated")
    args = parser.parse_args()
    print(f"{'case':<10} {'N':>5} {'median µs':>10} {'min µs':>8}")
    for name, make in CASES.items():
        for n in (int(x) for x in args.n.split(",")):
            if name == "json" and n != 1:
                continue
            round_trip = make(n)
            number = args.number or (20_000 if n == 1 else 500)
            timer = timeit.Timer(round_trip, timer=time.process_time)
            samples = timer.repeat(number=number, repeat=args.repeats)
            per_call = [s / number * 1e6 for s in samples]
            print(f"{name:<10} {n:>5} {statistics.median(per_call):>10.2f} {min(per_call):>8.2f}")


if __name__ == "__main__":
    main()
