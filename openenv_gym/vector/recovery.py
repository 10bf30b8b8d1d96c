"""Lost servers (``on_server_loss="restart"``): reconnect, and say which sub-envs lost what.

When a connection is lost, :func:`recover` replaces the shards that lost theirs (the
server started again if it died: :func:`~openenv_gym.assemble.reconnect`), and tells the
engine which sub-envs' results are now losses: those of the request that failed, those of
requests abandoned on the old connection, and (at their next step) the idle sub-envs of
the same server. A single env does the same for its one session (:func:`recover_single`).
"""

from __future__ import annotations

import functools
import logging
from typing import Protocol

import numpy as np

from openenv_gym.assemble import reconnect
from openenv_gym.exceptions import ConnectionLostError, OpenEnvGymError, RequestTimeoutError
from openenv_gym.options import Settings
from openenv_gym.providers import Provider
from openenv_gym.transport.dispatch import Dispatcher, Pending
from openenv_gym.transport.session import Session, session_of
from openenv_gym.transport.shards import Outcome, Shard, connect_shard
from openenv_gym.vector.actions import Planner
from openenv_gym.vector.drive import Blocking, Op
from openenv_gym.vector.episodes import Bool, Episodes

__all__ = ["LOST", "reconnect_shard", "recover", "recover_single"]

LOST = (ConnectionLostError, RequestTimeoutError)
"""What ``on_server_loss="restart"`` repairs: a lost connection, and one dropped because a
reply did not come in time (its late reply could never be matched to its request)."""

logger = logging.getLogger("openenv_gym.vector")
_single_logger = logging.getLogger("openenv_gym.env")


class Engine(Protocol):
    """What recovery reads and replaces of an :class:`~openenv_gym.vector.engine.Engine`."""

    settings: Settings
    single: bool
    provider: Provider
    dispatcher: Dispatcher
    planner: Planner
    episodes: Episodes
    in_flight: list[Pending]
    session: Session | None
    urls: list[str]

    def request_headers(self, k: int = 0) -> dict[str, str] | None:
        """The current headers of server ``k``."""


def recover(engine: Engine, outcomes: list[Outcome]) -> Op[tuple[list[Bool | None], list[Outcome]]]:
    """``on_server_loss="restart"``: replace the shards whose connection was lost or timed out.

    A shard that lost a connection (:class:`~openenv_gym.exceptions.ConnectionLostError`)
    is reconnected, its server restarted if it is gone or does not answer. One that only
    timed out (:class:`~openenv_gym.exceptions.RequestTimeoutError`: the transport dropped
    the connection, whose late reply could never be matched) is reconnected to the same
    server, never restarted: if it answers (it was stalled, say stopped and resumed), its
    sub-envs go on; if not, it is slow, not lost, and they keep their timeout.

    Returns, per outcome, its positions now counted as lost (or None), and the outcomes of
    requests abandoned on those shards (every position lost). Every other sub-env of a
    replaced shard is marked to report the loss at its next step. Where a lost shard
    cannot be reconnected, its sub-envs get the reason as their error.
    """
    shard_of = engine.planner.shard_of
    causes: dict[int, type[BaseException]] = {}
    for outcome in outcomes:
        for k, error in outcome.errors.items():
            shard = int(shard_of[outcome.ids[k]])
            if isinstance(error, ConnectionLostError):
                causes[shard] = ConnectionLostError
            elif isinstance(error, RequestTimeoutError):
                causes.setdefault(shard, RequestTimeoutError)
    masks: list[Bool | None] = [None] * len(outcomes)
    if not causes:
        return masks, []
    episodes = engine.episodes
    recovered: dict[int, type[BaseException]] = {}
    abandoned = []
    for k, cause in sorted(causes.items()):
        old = engine.dispatcher.shards[k]
        try:
            yield from reconnect_shard(engine, k, restart_hung=cause is ConnectionLostError)
        except OpenEnvGymError as exc:  # a lost shard's sub-envs: the reason
            for outcome in outcomes:
                for pos, error in outcome.errors.items():
                    if isinstance(error, ConnectionLostError) and shard_of[outcome.ids[pos]] == k:
                        outcome.errors[pos] = exc
            continue
        recovered[k] = cause
        abandoned += [p for p in engine.in_flight if p.shard is old]
        engine.in_flight = [p for p in engine.in_flight if p.shard is not old]
        episodes.lost[old.indices] = episodes.started[old.indices]  # refined below
    reported: list[int] = []
    for j, outcome in enumerate(outcomes):
        ids = np.asarray(outcome.ids, dtype=np.intp)
        mask = np.zeros(len(ids), dtype=np.bool_)
        for pos, error in list(outcome.errors.items()):
            kind = recovered.get(int(shard_of[ids[pos]]))
            if kind is not None and isinstance(error, kind):
                mask[pos] = True
                del outcome.errors[pos]
        if mask.any():
            masks[j] = mask
            reported += ids[mask].tolist()
    extra = []
    for pending in abandoned:
        ids = np.asarray(pending.ids, dtype=np.intp)
        gone = ConnectionLostError("the server was lost with this request in flight")
        extra.append(Outcome.failed(ids, "step", gone))
        reported += ids.tolist()
    episodes.lost[reported] = False  # reported now: not again at their next step
    return masks, extra


def reconnect_shard(engine: Engine, k: int, *, restart_hung: bool = True) -> Op[None]:
    """Replace shard ``k``: restart its server if it is gone, reconnect its sub-envs.

    ``restart_hung``: also restart a server that runs but does not answer (after a lost
    connection; not after a timeout, see :func:`recover`).

    Raises:
        ProviderError: The server is gone and its provider cannot start it again.
        OpenEnvGymError: The new connections failed.
    """
    old = engine.dispatcher.shards[k]
    settings = engine.settings

    def connect(url: str) -> Shard:
        return connect_shard(
            url, old.indices, old.protocol, settings.timeouts, engine.request_headers(k)
        )

    url, shard = yield Blocking(
        functools.partial(
            reconnect, engine.provider, k, old.url, connect, restart_hung=restart_hung
        ),
        lambda made: made[1].close(),
    )
    engine.dispatcher.replace(k, shard)
    if engine.single:
        _single_logger.warning("lost the server at %s; a new session on %s", old.url, url)
        engine.session = session_of(shard)
    else:
        logger.warning(
            "lost server %d (%s): %d sub-envs now on %s", k, old.url, len(old.indices), url
        )
    engine.urls[k] = url


def recover_single(engine: Engine, lost: BaseException) -> Op[None]:
    """A single env lost its connection (or it timed out): its session is replaced.

    As :func:`recover` for one shard: after a timeout the server is not restarted, and
    if it does not answer the env raises that timeout again (slow, not lost).
    """
    session = engine.session
    if session is not None:
        session.close()  # its socket is gone: a failed recovery leaves it closed
    timed_out = isinstance(lost, RequestTimeoutError)
    try:
        yield from reconnect_shard(engine, 0, restart_hung=not timed_out)
    except OpenEnvGymError:
        if timed_out:
            raise lost from None
        raise
