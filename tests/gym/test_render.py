"""Rendering: ``render_mode="rgb_array"`` for an env with a picture (Catch), ``"ansi"`` as before.

Gymnasium's own ``RecordVideo`` records Catch through moviepy (the ``video`` extra); the
video is read back with imageio's ffmpeg to count its frames.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import RecordVideo

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.vector import OpenEnvVectorEnv
from openenv_gym_servers.catch.gym import catch_grid, catch_image

pytestmark = pytest.mark.integration


def test_catch_renders_its_board_as_a_picture() -> None:
    env = gymnasium.make("openenv/Catch-v0", render_mode="rgb_array")
    try:
        assert env.unwrapped.render() is None  # nothing to show before the first reset
        obs, _ = env.reset(seed=3)
        frame = env.render()
        assert isinstance(frame, np.ndarray)
        assert (frame.shape, frame.dtype) == ((160, 80, 3), np.uint8)
        np.testing.assert_array_equal(frame, catch_image(obs))
        obs, *_ = env.step(0)
        np.testing.assert_array_equal(env.render(), catch_image(obs))
        assert "rgb_array" in env.metadata["render_modes"]
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


def test_the_picture_shows_ball_and_paddle() -> None:
    board = np.zeros(50, dtype=np.float32)
    board[1 * 5 + 4] = 1.0  # the ball: row 1, column 4
    board[9 * 5 + 0] = 1.0  # the paddle: bottom row, column 0
    image = catch_image(board, cell=2)
    colours = {tuple(image[r * 2, c * 2].tolist()) for r in range(10) for c in range(5)}
    assert len(colours) == 3  # background, ball, paddle
    assert tuple(image[2, 8].tolist()) != tuple(image[18, 0].tolist())


def test_ansi_stays() -> None:
    env = gymnasium.make("openenv/Catch-v0", render_mode="ansi")
    try:
        obs, _ = env.reset(seed=3)
        assert env.render() == catch_grid(obs)
    finally:
        env.close()


def test_record_video_writes_catch_episodes(tmp_path) -> None:
    imageio = pytest.importorskip("imageio.v3", reason="the video extra: pip install '.[video]'")
    env = RecordVideo(
        gymnasium.make("openenv/Catch-v0", render_mode="rgb_array"),
        str(tmp_path),
        episode_trigger=lambda episode: True,
        disable_logger=True,
    )
    try:
        for seed in (1, 2):
            env.reset(seed=seed)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(1)
                done = terminated or truncated
    finally:
        env.close()
    videos = sorted(tmp_path.glob("*.mp4"))
    assert len(videos) == 2, list(tmp_path.iterdir())
    frames = imageio.imread(videos[0], index=None)  # imageio-ffmpeg, which moviepy brings
    assert len(frames) == 10  # the reset and 9 steps
    assert frames[0].shape[:2] == (160, 80)


def test_the_vector_env_renders_one_picture_per_sub_env() -> None:
    envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=3, render_mode="rgb_array")
    try:
        obs, _ = envs.reset(seed=0)
        frames = envs.render()
        assert len(frames) == 3
        for frame, board in zip(frames, obs, strict=True):
            np.testing.assert_array_equal(frame, catch_image(board))
        assert envs.unwrapped.call("render")[0].shape == (160, 80, 3)
    finally:
        envs.close()


@pytest.mark.parametrize("cls", [OpenEnvEnv, OpenEnvVectorEnv])
def test_no_picture_no_rgb_array(cls) -> None:
    """Refused before any server starts (the local provider would start one)."""
    with pytest.raises(ConfigurationError, match="needs an env with a picture \\(catch"):
        cls("wordle", render_mode="rgb_array")
    with pytest.raises(ConfigurationError, match="needs an env with a picture"):
        cls("generic", base_url="http://127.0.0.1:9", render_mode="rgb_array")
    with pytest.raises(ConfigurationError, match="render_mode must be None, 'ansi' or"):
        cls("catch", render_mode="human")
