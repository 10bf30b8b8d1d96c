"""Method (f), the raw ceiling: N msgpack records in one WebSocket frame, echoed as observations.

No environment, no codec, no Gymnasium: what one ``websockets`` connection and
``msgpack`` can carry on this machine. The client sends one binary frame holding
``[{"env": i, "action": "[crane]"} for i in range(N)]``; the server, a separate process,
builds ``{"env": i, "obs": {"text": <200 chars>}, "reward": 0.0, "done": False}`` for each
record and sends them back in one frame. Strictly one frame in flight, compression off,
uvloop on both sides when installed (as our client and server use it).

    python benchmarks/_raw_ceiling.py serve      # prints its port, exits when stdin closes
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from asyncio.subprocess import PIPE
from typing import Any

import msgpack
from _harness import ECHO_ACTION, watch_stdin_then

__all__ = ["RawCeilingBench", "have_uvloop"]

SCRIPT = os.path.abspath(__file__)

TEXT200 = (
    "You are playing Wordle. A secret 5-letter word has been chosen. Feedback: G = right "
    "letter right spot, Y = right letter wrong spot, X = not in word. Your last guess [crane] "
    "scored X Y G X X. Guess again, and think before you type."
)[:200]


def have_uvloop() -> bool:
    """Whether uvloop can be imported here."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def _reply(frame: bytes) -> bytes:
    records = msgpack.unpackb(frame)
    return msgpack.packb(
        [{"env": r["env"], "obs": {"text": TEXT200}, "reward": 0.0, "done": False} for r in records]
    )


async def _serve() -> None:
    from websockets.asyncio.server import serve

    async def handler(connection: Any) -> None:
        async for frame in connection:
            await connection.send(_reply(frame))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    watch_stdin_then(lambda: loop.call_soon_threadsafe(stop.set))
    async with serve(
        handler, "127.0.0.1", 0, compression=None, max_size=None, ping_interval=None
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        await stop.wait()


class RawCeilingBench:
    """The client side, run by the (f) worker; starts the echo server as its child."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.server_pids: list[int] = []
        loop = "uvloop" if have_uvloop() else "asyncio"
        self.params: dict[str, Any] = {"client_loop": loop, "server_loop": loop}
        self._server: asyncio.subprocess.Process | None = None
        self._conn: Any = None

    async def setup(self) -> dict[str, Any]:
        from websockets.asyncio.client import connect

        self._server = await asyncio.create_subprocess_exec(
            sys.executable, SCRIPT, "serve", stdin=PIPE, stdout=PIPE
        )
        self.server_pids = [self._server.pid]
        assert self._server.stdout is not None
        line = await self._server.stdout.readline()
        if not line:
            raise RuntimeError("the raw echo server exited before printing its port")
        self._conn = await connect(
            f"ws://127.0.0.1:{int(line)}",
            compression=None,
            max_size=None,
            ping_interval=None,
            proxy=None,
        )
        return {}

    async def round(self) -> int:
        frame = msgpack.packb([{"env": i, "action": ECHO_ACTION} for i in range(self.n)])
        await self._conn.send(frame)
        reply = msgpack.unpackb(await self._conn.recv())
        if len(reply) != self.n:
            raise RuntimeError(f"expected {self.n} records, got {len(reply)}")
        return self.n

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
        server, self._server = self._server, None
        if server is not None:
            assert server.stdin is not None
            server.stdin.close()  # it stops at end of input
            try:
                await asyncio.wait_for(server.wait(), 5)
            except TimeoutError:
                server.kill()
                await server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["serve"])
    parser.parse_args()
    if have_uvloop():
        import uvloop

        uvloop.run(_serve())
    else:
        asyncio.run(_serve())


if __name__ == "__main__":
    main()
