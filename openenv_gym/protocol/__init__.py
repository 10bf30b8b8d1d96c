"""Sans-I/O protocol layer: bytes in, events out. No sockets, no asyncio, no threads.

* :mod:`openenv_gym.protocol.openenv` -- OpenEnv's JSON ``/ws`` session protocol.
* :mod:`openenv_gym.protocol.batch` -- our batched msgpack protocol, version 1.
* :mod:`openenv_gym.protocol.arrays` -- ndarrays as raw bytes + dtype + shape.

``docs/protocol.md`` specifies both protocols; tests cite its section numbers.
"""

from openenv_gym.protocol import arrays, batch, openenv

__all__ = ["arrays", "batch", "openenv"]
