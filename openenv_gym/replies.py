"""What a server's reply becomes in a step: the observation a codec decodes, and the ``info``.

Shared by the single env, the vector env (its per-env paths) and the benchmarks, so one
reply gives the same observation and info whichever env and protocol received it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.spaces import Codec

__all__ = ["reply_info", "wire_observation"]


def reply_info(
    reply: ObservationReceived, observed: str | Collection[str] | None = None
) -> dict[str, Any]:
    """Build the ``info`` of a step.

    It holds every observation field the Gymnasium observation (``observed``: a field
    name or a set of them, usually :attr:`Codec.observed <openenv_gym.spaces.Codec>`)
    leaves out, and ``metadata`` when the server sent a non-empty one (top level,
    openenv >= 0.4, or nested in the observation). The same reply gives the same info over
    the batched and the JSON protocol, so info keys and dtypes stay stable from step to step.
    """
    observation = reply.observation
    if observed is None or isinstance(observed, str):
        info = {k: v for k, v in observation.items() if k != observed and k != "metadata"}
    else:
        info = {k: v for k, v in observation.items() if k not in observed and k != "metadata"}
    metadata = reply.metadata or observation.get("metadata")
    if metadata:
        info["metadata"] = metadata
    return info


def wire_observation(
    codec: Codec, observation: Mapping[str, Any], metadata: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """What the codec decodes: the observation, with ``metadata`` in it if the codec reads it.

    OpenEnv's JSON replies nest ``metadata`` in the observation (openenv >= 0.4); the batched
    protocol sends it apart. A codec with ``reads_metadata`` sees it in the same place on both.
    """
    if codec.reads_metadata and metadata and not observation.get("metadata"):
        return {**observation, "metadata": metadata}
    return observation
