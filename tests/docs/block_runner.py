"""Runs the Python blocks of one page in one namespace, as a reader runs them one by one.

Not a test module: run_blocks.PythonSession starts it (``python block_runner.py FD``). Each
line on stdin is a JSON request ``{"code", "page"}``; the code is compiled under the page's
name, padded so a traceback names the page's own line numbers. Each reply, one JSON line
on the file descriptor FD, says whether the block raised (with the traceback) and what it
printed. The blocks' own output also goes to this process's stdout and stderr. With
``DOCS_HOSTS`` (JSON: name -> addresses) set, those names resolve to those addresses.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
import traceback
from typing import Any, TextIO


class _Tee(io.TextIOBase):
    def __init__(self, *streams: TextIO) -> None:
        self._streams = streams

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


def _resolve(hosts: dict[str, list[str]]) -> None:
    """Names in ``DOCS_HOSTS`` resolve to the loopback addresses given (a cluster's DNS)."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.rstrip(".") in hosts:
            found = []
            for address in hosts[host.rstrip(".")]:
                found += real(address, port, *args, **kwargs)
            return found
        return real(host, port, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo


def main() -> None:
    if os.environ.get("DOCS_HOSTS"):
        _resolve(json.loads(os.environ["DOCS_HOSTS"]))
    replies = os.fdopen(int(sys.argv[1]), "w", encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    sys.path.insert(0, os.getcwd())  # files the blocks write are importable, as in a REPL
    for line in sys.stdin:
        request = json.loads(line)
        printed = io.StringIO()
        reply: dict[str, Any] = {"ok": True}
        try:
            code = compile(request["code"], request["page"], "exec")
            with contextlib.redirect_stdout(_Tee(sys.stdout, printed)):
                exec(code, namespace)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                reply = {"ok": False, "error": f"SystemExit({exc.code!r})"}
        except BaseException:
            reply = {"ok": False, "error": traceback.format_exc()}
        sys.stdout.flush()
        sys.stderr.flush()
        reply["stdout"] = printed.getvalue()
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
