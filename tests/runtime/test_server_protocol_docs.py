"""docs/protocol.md 4.1 is what ``openenv-gym serve echo`` really sends, frame for frame."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _transcripts() -> list[list[str]]:
    """The ```text blocks of section 4.1, as lists of frame lines."""
    section = DOC.read_text(encoding="utf-8").split("### 4.1 ", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```text\n(.*?)```", section, re.DOTALL)
    return [[line for line in block.splitlines() if line[:1] in "→←"] for block in blocks]


@pytest.mark.integration
def test_session_transcript_is_what_serve_echo_sends(cli_server):
    [session, _] = _transcripts()
    server = cli_server("echo")
    ws_url = server.url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, proxy=None, open_timeout=5) as ws:
        for sent, expected in zip(session[0::2], [*session[1::2], None], strict=True):
            assert sent.startswith("→ ")
            ws.send(sent[2:])
            if expected is None:  # the close: the server closes the socket, code 1000
                with pytest.raises(ConnectionClosedOK):
                    ws.recv(timeout=5)
                assert ws.close_code == 1000
            else:
                assert f"← {ws.recv(timeout=5)}" == expected


@pytest.mark.integration
def test_capacity_frame_is_what_serve_echo_sends(cli_server):
    [_, capacity] = _transcripts()
    [expected] = capacity
    server = cli_server("echo", "--max-sessions", "8")
    ws_url = server.url.replace("http://", "ws://") + "/ws"
    with contextlib.ExitStack() as stack:
        for _ in range(8):
            held = stack.enter_context(connect(ws_url, proxy=None, open_timeout=5))
            held.send('{"type":"reset"}')
            held.recv(timeout=5)
        with connect(ws_url, proxy=None, open_timeout=5) as ws:
            assert f"← {ws.recv(timeout=5)}" == expected
            with pytest.raises(ConnectionClosedOK):
                ws.recv(timeout=5)
            assert ws.close_code == 1000
