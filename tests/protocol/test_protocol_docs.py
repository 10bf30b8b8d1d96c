"""The examples of docs/protocol.md section 4 are what the code sends, byte for byte."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```text\n(.*?)```", re.DOTALL)


def documented() -> dict[str, bytes]:
    """Example name -> the bytes its hex dump lists (the text before each ``#``)."""
    examples = {}
    for name, body in EXAMPLE.findall(DOC.read_text(encoding="utf-8")):
        hex_text = " ".join(line.split("#", 1)[0] for line in body.splitlines())
        examples[name] = bytes.fromhex(hex_text)
    return examples


def produced() -> dict[str, bytes]:
    """The same frames, made by the protocol objects (section 4.2's scenario)."""
    frames = {}
    client = bp.BatchClient(client_name="demo")
    server = bp.BatchServer(max_frame=2**20)

    def client_to_server(name: str) -> bp.BatchRequestReceived | bp.HelloRequestReceived:
        [frames[name]] = client.data_to_send()
        server.receive_data(frames[name])
        [event] = server.events_received()
        return event

    def server_to_client(name: str) -> None:
        [frames[name]] = server.data_to_send()
        client.receive_data(frames[name])
        client.events_received()

    client.send_hello()
    client_to_server("hello-request")
    server.send_hello(server="openenv-gym", env="echo", max_slots=8)
    server_to_client("hello-reply")
    client.send_open([0, 1])
    request = client_to_server("open-request")
    assert isinstance(request, bp.BatchRequestReceived)
    server.send_results(
        request, [None, bp.SlotError("CAPACITY_REACHED", "full", {"max_sessions": 1})]
    )
    server_to_client("open-reply")
    client.send_step([0], [{"message": "hi"}])
    request = client_to_server("step-request")
    assert isinstance(request, bp.BatchRequestReceived)
    server.send_results(request, [bp.SlotResult({"echoed_message": "hi"}, 0.5, False)])
    server_to_client("step-reply")
    frames["ndarray"] = bp.encode_frame({"x": np.array([[1, 2, 3]], dtype="|u1")})
    server.receive_data(bp.encode_frame({"op": "bogus", "id": 3}))
    [frames["error-reply"]] = server.data_to_send()
    return frames


def test_every_example_is_listed() -> None:
    assert sorted(documented()) == sorted(produced())


@pytest.mark.parametrize("name", sorted(produced()))
def test_batched_examples_match_the_encoder(name: str) -> None:
    """4.2: each annotated hex dump is exactly the frame the code writes."""
    assert documented()[name] == produced()[name]


def test_json_transcript_matches_the_sessions() -> None:
    """4.1: every line of the transcript is a frame ClientSession/ServerSession write."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    client, server = op.ClientSession(), op.ServerSession()
    sent: list[str] = []

    def exchange(answer: Callable[[op.ServerSession], None]) -> None:
        [request] = client.data_to_send()
        server.receive_data(request)
        server.events_received()
        answer(server)
        [reply] = server.data_to_send()
        client.receive_data(reply)
        client.events_received()
        sent.extend([f"→ {request}", f"← {reply}"])

    client.send_reset(seed=1, episode_id="ep-42")
    exchange(
        lambda s: s.send_observation(
            {"metadata": {}, "echoed_message": "Echo environment ready!", "message_length": 0},
            0.0,
            False,
        )
    )
    client.send_step({"message": "hi"})
    step_metadata = {"original_message": "hi", "step": 1}
    exchange(
        lambda s: s.send_observation(
            {"metadata": step_metadata, "echoed_message": "hi", "message_length": 2},
            0.2,
            False,
            step_metadata,
        )
    )
    client.send_state()
    exchange(lambda s: s.send_state({"episode_id": "ep-42", "step_count": 1}))
    client.send_close()
    sent.append(f"→ {client.data_to_send()[0]}")
    capacity = op.ServerSession()
    capacity.send_error(
        op.ErrorCode.CAPACITY_REACHED,
        "Server at capacity: 8/8 sessions active. Cannot accept new connections.",
        active_sessions=8,
        max_sessions=8,
    )
    sent.append(f"← {capacity.data_to_send()[0]}")
    for line in sent:
        assert line in lines
