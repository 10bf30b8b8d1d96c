"""``openenv-gym check`` against deliberately broken servers: each failure names its problem."""

from __future__ import annotations

import socket
import time

import psutil
import pytest
from check_fake_servers import FakeServer, Faults

from openenv_gym.check import CHECK_NAMES, Status, check_server
from openenv_gym.cli import main
from openenv_gym.config import Timeouts

pytestmark = pytest.mark.integration

FAST = Timeouts(connect=2.0, step=1.0, close=1.0)


def _open_sockets() -> int:
    return sum(1 for c in psutil.Process().net_connections("tcp") if c.status != "LISTEN")


def _check(faults: Faults, **kwargs):
    with FakeServer(faults) as server:
        report = check_server(server.url, timeouts=FAST, **kwargs)
        deadline = time.monotonic() + 5
        while server.active and time.monotonic() < deadline:  # the server's side of close
            time.sleep(0.01)
        assert server.active == 0, "the checker left a session open"
    return report


def test_a_conformant_fake_passes_and_skips_batch():
    report = _check(Faults())
    assert report.ok, report.render()
    statuses = {r.name: r.status for r in report.results}
    assert statuses == {**dict.fromkeys(CHECK_NAMES, Status.PASS), "batch": Status.SKIP}
    assert report["capacity"].info == {"capacity": 3}
    assert report["session"].info["action"] == {"message": "a"}
    assert report["batch"].detail.startswith("not offered")
    assert report["metadata"].detail == "GET /metadata: 200 (name 'fake', version '0.0.1')"


def test_observation_without_observation_key_fails():
    report = _check(Faults(no_observation_key=True))
    assert not report.ok
    session = report["session"]
    assert session.status is Status.FAIL
    assert "reset: malformed reply: observation frame without an 'observation' object" in (
        session.detail
    )
    assert report["seed"].status is Status.FAIL
    assert report["errors"].status is Status.PASS  # error frames are still right


def test_reward_string_fails():
    report = _check(Faults(reward="high"))
    assert report["session"].status is Status.FAIL
    assert "reward must be a finite number or null, got 'high'" in report["session"].detail


def test_missing_schema_fails_and_step_is_not_tried():
    report = _check(Faults(no_schema=True))
    assert not report.ok
    assert report["schema"].status is Status.FAIL
    assert report["schema"].detail == (
        "GET /schema answered HTTP 404, expected 200 with the JSON schemas"
    )
    assert report["session"].status is Status.WARN
    assert "step not tried: GET /schema answered HTTP 404" in report["session"].detail


def test_missing_schema_with_a_given_action_steps():
    report = _check(Faults(no_schema=True), action={"message": "hi"})
    assert report["schema"].status is Status.FAIL
    assert report["session"].status is Status.PASS
    assert 'step {"message": "hi"}' in report["session"].detail


def test_missing_metadata_warns():
    report = _check(Faults(no_metadata=True))
    assert report.ok
    assert report["metadata"].status is Status.WARN
    assert report["metadata"].detail == "GET /metadata answered HTTP 404 (OpenEnv servers serve it)"


def test_ignoring_close_fails():
    report = _check(Faults(ignore_close=True))
    assert not report.ok
    close = report["close"]
    assert close.status is Status.FAIL
    assert close.detail.startswith(
        'the server did not close the socket within 1.0 s of {"type":"close"}'
    )
    statuses = {r.name: r.status for r in report.results}
    assert [n for n, s in statuses.items() if s is Status.FAIL] == ["close"]


def test_a_silent_server_times_out_per_check():
    report = _check(Faults(silent=frozenset({"step"})))  # returns: each check timed out
    assert report["session"].status is Status.FAIL
    assert report["session"].detail == "step: no reply within 1.0 s"


def test_check_budget_bounds_a_check():
    with FakeServer(Faults(silent=frozenset({"state"}))) as server:
        report = check_server(
            server.url, timeouts=Timeouts(connect=2.0, step=30.0, close=1.0), check_timeout=1.0
        )
    assert report["session"].status is Status.FAIL
    assert report["session"].detail.endswith("the check did not finish within 1.0 s")


def test_unseeded_resets_only_warn():
    report = _check(Faults(unseeded=True))
    assert report.ok
    assert report["seed"].status is Status.WARN
    assert (
        "gave different replies on fresh sessions seeded alike (first difference: reset: echoed)"
        in (report["seed"].detail)
    )


def test_given_action_that_fails_validation_fails():
    report = _check(Faults(), action={"text": "hi"})
    assert report["session"].status is Status.FAIL
    assert (
        'step {"text": "hi"} (the given action) was answered with error VALIDATION_ERROR'
        in report["session"].detail
    )


def test_unhealthy_body_warns():
    report = _check(Faults(health={"status": "starting"}))
    assert report["health"].status is Status.WARN
    assert report["health"].detail == (
        "GET /health: 200 but {'status': 'starting'}, expected {\"status\": \"healthy\"}"
    )


def test_wrong_error_code_fails():
    report = _check(Faults(invalid_json_code="VALIDATION_ERROR"))
    errors = report["errors"]
    assert errors.status is Status.FAIL
    assert errors.detail.startswith(
        "a frame that is not JSON was answered with VALIDATION_ERROR, expected INVALID_JSON; "
    )
    assert errors.detail.endswith(
        "UNKNOWN_TYPE, VALIDATION_ERROR, session kept (state still answered)"
    )


def test_bad_json_ending_the_session_fails():
    report = _check(Faults(close_on_bad_json=True))
    assert report["errors"].status is Status.FAIL
    assert report["errors"].detail == (
        "a frame that is not JSON: the server closed the session without a reply "
        "(close code 1000); the session must survive INVALID_JSON"
    )


def test_extra_action_field_accepted_fails_when_the_schema_forbids_it():
    report = _check(Faults(accept_extra=True))
    assert report["errors"].status is Status.FAIL
    assert (
        "a step with an extra action field was accepted (an observation), expected "
        "VALIDATION_ERROR although the action schema forbids extra fields"
    ) in report["errors"].detail


def test_state_answered_with_the_wrong_frame_fails():
    report = _check(Faults(state_type="observation"))
    assert report["session"].status is Status.FAIL
    assert report["session"].detail == (
        "state was answered with an observation frame, expected a state frame"
    )


def test_unknown_reply_type_fails():
    report = _check(Faults(state_type="status"))
    assert report["session"].status is Status.FAIL
    assert "state: malformed reply: unknown server frame type 'status'" in (
        report["session"].detail
    )


def test_close_with_another_code_warns():
    report = _check(Faults(close_code=1001))
    assert report.ok
    assert report["close"].status is Status.WARN
    assert report["close"].detail == "the server closed with code 1001, expected 1000"
    assert report["close"].info == {"close_code": 1001}


def test_capacity_without_a_frame_fails():
    report = _check(Faults(capacity_silent=True))
    assert report["capacity"].status is Status.FAIL
    assert report["capacity"].detail == (
        "state on session 4: the server closed the session without a reply (close code 1000); "
        "a server at capacity sends CAPACITY_REACHED first"
    )


def test_unreachable_server_fails_health_and_skips_the_rest():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    report = check_server(f"http://127.0.0.1:{port}", timeouts=FAST)
    assert report["health"].status is Status.FAIL
    assert report["health"].detail.startswith("the server is unreachable: GET ")
    assert {r.status for r in report.results[1:]} == {Status.SKIP}
    assert not report.ok


def test_no_socket_is_left_open():
    before = _open_sockets()
    for faults in (Faults(), Faults(ignore_close=True), Faults(silent=frozenset({"reset"}))):
        _check(faults)
    deadline = time.monotonic() + 10  # the sockets close as the checks end: wait for it
    while not _open_sockets() <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _open_sockets() <= before


@pytest.mark.parametrize(
    ("faults", "problem"),
    [
        (Faults(no_observation_key=True), "observation frame without an 'observation' object"),
        (Faults(no_schema=True), "GET /schema answered HTTP 404"),
        (Faults(ignore_close=True), "the server did not close the socket"),
    ],
)
def test_cli_exits_1_and_names_the_problem(capsys, faults, problem):
    with FakeServer(faults) as server:
        status = main(["check", server.url, "--reply-timeout", "2"])
    out = capsys.readouterr().out
    assert status == 1
    failed = [line for line in out.splitlines() if line.startswith("  FAIL")]
    assert any(problem in line for line in failed), out
    assert out.splitlines()[-1].startswith("FAILED: ")
    assert "Traceback" not in out


def test_cli_warnings_exit_0(capsys):
    with FakeServer(Faults(no_metadata=True, unseeded=True)) as server:
        status = main(["check", server.url])
    out = capsys.readouterr().out
    assert status == 0
    assert out.splitlines()[-1] == "OK: 6 passed, 2 warnings, 0 failed, 1 skipped"
