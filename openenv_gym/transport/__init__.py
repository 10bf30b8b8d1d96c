"""Transport: every socket of the client, driven on the calling thread (no event loop).

``wire`` (one WebSocket over websockets' sans-I/O protocol), ``connection`` (a JSON
``/ws`` session, a batched connection), ``shards`` and ``dispatch`` (a vector env's
servers: one plan in, columnar outcomes out), ``session`` (a single env's session) and
``keepalive`` (idle connections keep answering pings).
"""
