"""Transport: every socket of the client, driven on the calling thread (no event loop).

``handshake`` (opening a connection: TCP, proxy, TLS, the upgrade, redirects), ``wire``
(one open WebSocket over websockets' sans-I/O protocol), ``waiting`` (the one place the
client blocks), ``connection`` (a JSON ``/ws`` session) and ``batch_connection`` (a batched
connection), ``raw`` (a raw socket for tools that probe a server, and the one place
connections are closed or dropped), ``shards``, ``outcome`` and ``dispatch`` (a vector
env's servers: one plan in, columnar outcomes out), ``session`` (a single env's session)
and ``keepalive`` (idle connections keep answering pings, and pinging).

The package exports what a tool outside the env classes may use: the raw socket and the
batched connection (``openenv-gym check`` is built on them).
"""

from openenv_gym.transport.batch_connection import BatchConnection
from openenv_gym.transport.connection import BatchUnsupportedError
from openenv_gym.transport.raw import CloseFrame, RawSocket

__all__ = ["BatchConnection", "BatchUnsupportedError", "CloseFrame", "RawSocket"]
