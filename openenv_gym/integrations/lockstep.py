"""Many text episodes stepped together: a model's answers in, one vector step per turn.

:class:`Lockstep` drives a ``gymnasium.vector.VectorEnv`` for LLM rollouts. Each turn it
takes the plain-text answers of the episodes still running, parses them into actions
(:attr:`TextInterface.parse_action <openenv_gym.integrations.text.TextInterface>`), and
steps **only those sub-envs** in one batched request per server
(:meth:`OpenEnvVectorEnv.send <openenv_gym.vector.OpenEnvVectorEnv.send>` /
``recv``). An answer with no valid action does not reach the environment: the episode is
told why, as its next observation, and loses the turn. Both the TRL lockstep
``rollout_func`` and the vLLM loop are built on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from openenv_gym.exceptions import EpisodeOverError, InvalidActionError
from openenv_gym.infos import info_at
from openenv_gym.integrations.text import TextInterface, action_check, text_interface
from openenv_gym.vector import OpenEnvVectorEnv

__all__ = ["Lockstep", "Turn", "info_at", "step_text"]


class Turn(NamedTuple):
    """What one answer did.

    Attributes:
        text: What the model is told next: the observation as text (with a closing line
            when the episode ended), or why the answer was not an action.
        reward: The step's reward (0.0 when the answer was not an action).
        terminated: The episode ended (the env's ``terminated``).
        truncated: The episode was cut short (``truncated``).
        action: The action taken, or None when the answer held none.
        info: The step's info (empty when the answer was not an action).
    """

    text: str
    reward: float
    terminated: bool
    truncated: bool
    action: Any
    info: dict[str, Any]


def step_text(
    interface: TextInterface, obs: Any, terminated: bool, truncated: bool, info: Mapping[str, Any]
) -> str:
    """The observation of a step as text; the last step of an episode says it is over."""
    text = interface.observation_text(obs)
    if terminated or truncated:
        nested = info.get("info")  # OpenEnv observations may carry an ``info`` dict
        reason = info.get("reason")
        if reason is None and isinstance(nested, Mapping):
            reason = nested.get("reason")
        ending = "The episode is over" + (f": {reason}" if isinstance(reason, str) else ".")
        if isinstance(reason, str) and text.strip() == reason.strip():
            text = ""  # the observation is the reason itself (Wordle's win): say it once
        text = f"{text}\n{ending}" if text else ending
    return text


class Lockstep:
    """Text episodes over the sub-envs of a vector env, stepped together.

    Args:
        envs: The vector env. :class:`~openenv_gym.vector.OpenEnvVectorEnv` steps only
            the sub-envs that answered; any other ``VectorEnv`` is stepped whole, its idle
            sub-envs (and those whose answer held no action) with a sampled action whose
            result is dropped: such an episode is then over (``truncated``; its next answer
            raises ``EpisodeOverError``).
        interface: How text maps to actions and back (default:
            :func:`~openenv_gym.integrations.text.text_interface` of ``envs``).
    """

    def __init__(self, envs: VectorEnv[Any, Any, Any], interface: TextInterface | None = None):
        self.envs = envs
        self.interface = interface or text_interface(envs)
        self.num_envs: int = envs.num_envs
        self._partial = isinstance(envs.unwrapped, OpenEnvVectorEnv)
        self._single_obs = envs.single_observation_space
        self._single_action = envs.single_action_space
        self._action_ok = action_check(envs)
        self._batch_spaces: dict[int, Any] = {}
        self.returns = [0.0] * self.num_envs
        """Per sub-env: the episode's return so far."""
        self.done = [True] * self.num_envs
        """Per sub-env: the episode ended (or never started)."""

    def reset(self, seed: int | Sequence[int | None] | None = None) -> list[str]:
        """Start an episode in every sub-env; return each one's first observation as text."""
        envs: Any = self.envs  # VectorEnv.reset takes a seed per sub-env too
        obs, _ = envs.reset(seed=seed)
        self.returns = [0.0] * self.num_envs
        self.done = [False] * self.num_envs
        text = self.interface.observation_text
        return [text(o) for o in iterate(self.envs.observation_space, obs)]

    def step(self, answers: Mapping[int, str]) -> dict[int, Turn]:
        """Act on the answers of some sub-envs (index -> the model's text).

        Raises:
            EpisodeOverError: A sub-env's episode has already ended.
            EnvErrorGroup: Stepping some sub-envs failed (a dead server, ...).
        """
        over = sorted(i for i in answers if self.done[i])
        if over:
            raise EpisodeOverError(f"sub-envs {over} finished their episode: reset() first")
        turns: dict[int, Turn] = {}
        actions: dict[int, Any] = {}
        for i, answer in answers.items():
            try:
                action = self.interface.parse_action(answer)
                if not self._action_ok(action):
                    raise InvalidActionError(f"{action!r} is not a valid action")
            except InvalidActionError as exc:
                turns[i] = Turn(f"Invalid action: {exc}", 0.0, False, False, None, {})
                continue
            actions[i] = action
        if actions:
            turns.update(self._step(actions))
            if not self._partial:  # the others took a random step: their episodes are void
                for i in range(self.num_envs):
                    if i not in actions:
                        self.done[i] = True
                for i, turn in turns.items():
                    if turn.action is None:
                        note = "; the episode is over: this vector env stepped it at random"
                        turns[i] = turn._replace(text=turn.text + note, truncated=True)
        for i, turn in turns.items():
            self.returns[i] += turn.reward
            self.done[i] = turn.terminated or turn.truncated
        return turns

    def _batch_space(self, n: int) -> Any:
        space = self._batch_spaces.get(n)
        if space is None:
            space = self._batch_spaces[n] = batch_space(self._single_obs, n)
        return space

    def _step(self, actions: dict[int, Any]) -> dict[int, Turn]:
        ids = list(actions)
        if self._partial:
            vec: Any = self.envs
            vec.send([actions[i] for i in ids], ids)
            obs, rewards, terms, truncs, infos = vec.recv(batch_size=len(ids))
            order = [int(i) for i in infos["env_id"]]
            per_obs = list(iterate(self._batch_space(len(order)), obs))
            info_of = vec.unwrapped.info_of  # per env as it came: no unbatching
        else:
            everyone = [
                actions[i] if i in actions else self._single_action.sample()
                for i in range(self.num_envs)
            ]
            out: Any = create_empty_array(self._single_action, self.num_envs)
            batched = concatenate(self._single_action, everyone, out)
            obs, rewards, terms, truncs, infos = self.envs.step(batched)
            order = list(range(self.num_envs))
            per_obs = list(iterate(self.envs.observation_space, obs))

            def info_of(i: int) -> dict[str, Any]:
                return info_at(infos, i)

        wanted = set(ids)
        turns: dict[int, Turn] = {}
        for j, i in enumerate(order):
            if i not in wanted:
                continue
            term, trunc = bool(terms[j]), bool(truncs[j])
            info = info_of(i)
            text = step_text(self.interface, per_obs[j], term, trunc, info)
            turns[i] = Turn(text, float(np.asarray(rewards[j])), term, trunc, actions[i], info)
        return turns
