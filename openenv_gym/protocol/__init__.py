"""Sans-I/O protocol layer: bytes in, events out. No sockets, no asyncio, no threads.

* :mod:`openenv_gym.protocol.openenv` -- OpenEnv's JSON ``/ws`` session protocol.
* :mod:`openenv_gym.protocol.batch` -- our batched msgpack protocol, versions 1 and 2.
* :mod:`openenv_gym.protocol.states` -- every state machine of both, as transition tables.
* :mod:`openenv_gym.protocol.arrays` -- ndarrays as raw bytes + dtype + shape.
* :mod:`openenv_gym.protocol.frames` -- WebSocket frame heads.

``docs/protocol.md`` specifies both protocols; tests cite its section numbers.
"""

from openenv_gym.protocol import arrays, batch, openenv, states

__all__ = ["arrays", "batch", "openenv", "states"]
