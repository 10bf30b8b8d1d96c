"""In-process tests of the Wordle environment's game logic, seeding and wire models."""

from __future__ import annotations

import random
import re
from importlib import resources
from typing import Any

import msgpack
import pytest
from pydantic import BaseModel, ValidationError

from openenv_gym.runtime.environment import Environment, trusted
from openenv_gym.spaces import codec_for
from openenv_gym_servers.wordle import (
    TextArenaAction,
    TextArenaObservation,
    WordleAction,
    WordleEnvironment,
    WordleMessage,
    WordleObservation,
    WordleState,
)
from openenv_gym_servers.wordle import environment as wordle_module
from openenv_gym_servers.wordle.words import (
    feedback_line,
    score_guess,
    secret_words,
    valid_words,
)

ADMIN_PREFIX = "You attempted an invalid move. Reason: "


def secret_of(env: WordleEnvironment) -> str:
    return str(env.state.raw_state["game_state"]["secret_word"])


def play(env: WordleEnvironment, message: str) -> WordleObservation:
    return env.step(WordleAction(message=message))


def wrong_words(secret: str, count: int) -> list[str]:
    """``count`` valid guesses, none equal to ``secret``, in a fixed order."""
    return [w for w in sorted(valid_words()) if w != secret][:count]


def completion(guess: str, secret: str) -> float:
    feedback = score_guess(guess, secret)
    return (feedback.count("G") + 0.5 * feedback.count("Y")) / 5


@pytest.fixture
def env() -> WordleEnvironment:
    return WordleEnvironment()


@pytest.fixture
def crane_env(monkeypatch: pytest.MonkeyPatch) -> WordleEnvironment:
    """An environment whose secret word is always ``crane``."""
    monkeypatch.setattr(wordle_module, "secret_words", lambda: ("crane",))
    env = WordleEnvironment()
    env.reset(seed=0)
    assert secret_of(env) == "crane"
    return env


# --------------------------------------------------------------------- feedback rule


@pytest.mark.parametrize(
    ("guess", "secret", "expected"),
    [
        ("crane", "crane", "GGGGG"),
        ("react", "crane", "YYGYX"),
        ("eerie", "crane", "XXYXG"),  # only one E in the secret: the green one takes it
        ("llama", "hello", "YYXXX"),  # two Ls in the secret: both guessed Ls are yellow
        ("lolly", "hello", "XYGGX"),  # greens use up both Ls before the yellow pass
        ("geese", "these", "XXGGG"),  # green-first: the E at index 1 gets nothing
        ("abbey", "babes", "YYGGX"),
        ("stare", "tears", "YYGGY"),
        ("tears", "stare", "YYGGY"),
        ("steer", "eerie", "XXYYY"),
        ("eerie", "steer", "YYYXX"),  # three Es guessed, two in the secret: third is X
        ("mummy", "crane", "XXXXX"),
    ],
)
def test_score_guess_duplicate_letters(guess: str, secret: str, expected: str) -> None:
    assert "".join(score_guess(guess, secret)) == expected


def reference_score(guess: str, secret: str) -> tuple[str, ...]:
    """TextArena's two passes, written plainly: greens first, then yellows left to right."""
    feedback = ["X"] * len(secret)
    unused: list[str | None] = list(secret)
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            feedback[i] = "G"
            unused[i] = None
    for i, g in enumerate(guess):
        if feedback[i] != "G" and g in unused:
            feedback[i] = "Y"
            unused[unused.index(g)] = None
    return tuple(feedback)


def test_score_guess_matches_the_plain_two_pass_rule() -> None:
    rng = random.Random(0)
    words = sorted(valid_words())
    pairs = [(rng.choice(words), rng.choice(secret_words())) for _ in range(5000)]
    pairs += [(w, w) for w in secret_words()[:20]]
    pairs += [("GREAT", "GRAPE"), ("GGXYX", "XYGGG"), ("aaaaa", "aabbb"), ("", "")]
    for guess, secret in pairs:
        assert score_guess(guess, secret) == reference_score(guess, secret), (guess, secret)


def test_score_guess_rejects_words_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        score_guess("cranes", "crane")


def test_feedback_line_is_score_guess_joined_by_spaces() -> None:
    rng = random.Random(1)
    words = sorted(valid_words())
    pairs = [(rng.choice(words), rng.choice(secret_words())) for _ in range(5000)]
    pairs += [(w, w) for w in secret_words()[:20]]
    # repeated letters (the two-pass path), other lengths, and non-letters
    pairs += [("eerie", "crane"), ("lolly", "hello"), ("steer", "eerie"), ("aaaaa", "aabbb")]
    pairs += [("GREAT", "GRAPE"), ("abc", "abd"), ("abc", "abc"), ("", ""), ("abcdef", "abcdeg")]
    for guess, secret in pairs:
        assert feedback_line(guess, secret) == " ".join(score_guess(guess, secret)), (guess, secret)
    for guess, secret in [("cranes", "crane"), ("crane", "cranes"), ("cran", "crane")]:
        with pytest.raises(ValueError, match="differ in length"):
            feedback_line(guess, secret)


# --------------------------------------------------------------------- word lists


def test_word_lists_are_five_letter_lowercase_and_secret_subset_of_valid() -> None:
    secrets = secret_words()
    valid = valid_words()
    assert len(secrets) >= 300
    assert len(set(secrets)) == len(secrets)
    assert list(secrets) == sorted(secrets)
    assert set(secrets) <= valid
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in valid)
    assert {"crane", "slate", "react", "hello"} <= valid
    assert "zzzzz" not in valid


def test_word_lists_are_loaded_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    assert secret_words() is secret_words()
    assert valid_words() is valid_words()

    def no_disk(*args: object) -> None:
        raise AssertionError("word lists read again")

    monkeypatch.setattr(resources, "files", no_disk)
    for _ in range(1000):
        env = WordleEnvironment()
        env.reset()
    obs = play(env, "[hello]")
    assert obs.reward is not None


# --------------------------------------------------------------------- reset and seeding


def test_reset_observation(env: WordleEnvironment) -> None:
    obs = env.reset(seed=1, episode_id="ep-1")
    assert obs.done is False
    assert obs.reward == 0.0
    assert obs.prompt.startswith("You are Playing Wordle.\nA secret 5-letter word")
    assert "wrap your word in square brackets (e.g., '[apple]')" in obs.prompt
    assert obs.prompt.endswith("Enter your guess to begin.")
    assert obs.messages == [
        WordleMessage(sender_id=-1, content=obs.prompt + "\n", category="PROMPT")
    ]
    assert obs.current_player_id == 0
    assert obs.legal_players == [0]
    assert obs.info == {}
    assert obs.metadata == {"env_id": "Wordle-v0", "turn": 0}

    state = env.state
    assert isinstance(state, WordleState)
    assert state.episode_id == "ep-1"
    assert state.step_count == 0
    assert state.env_id == "Wordle-v0"
    assert state.num_players == 1
    assert state.max_turns is None
    assert state.turn == 0
    assert state.last_reward == 0.0
    assert state.last_info == {}
    game_state = state.raw_state["game_state"]
    assert game_state["guess_history"] == []
    assert game_state["word_length"] == 5
    assert game_state["num_guesses"] == 6
    assert game_state["secret_word"] in secret_words()


def test_same_seed_same_secret() -> None:
    a, b = WordleEnvironment(), WordleEnvironment()
    for seed in (0, 1, 42, 2**40):
        a.reset(seed=seed)
        b.reset(seed=seed)
        assert secret_of(a) == secret_of(b)
        a.reset(seed=seed)
        assert secret_of(a) == secret_of(b)


def test_different_seeds_give_different_secrets(env: WordleEnvironment) -> None:
    secrets = set()
    for seed in range(20):
        env.reset(seed=seed)
        secrets.add(secret_of(env))
    assert len(secrets) > 1


def test_seeded_reset_fixes_following_unseeded_resets() -> None:
    def sequence() -> list[str]:
        env = WordleEnvironment()
        env.reset(seed=123)
        words = [secret_of(env)]
        for _ in range(5):
            env.reset()
            words.append(secret_of(env))
        return words

    first = sequence()
    assert first == sequence()
    assert len(set(first)) > 1


def test_unseeded_instances_are_fresh() -> None:
    secrets = set()
    for _ in range(20):
        env = WordleEnvironment()
        env.reset()
        secrets.add(secret_of(env))
    assert len(secrets) > 1


def test_seeding_leaves_the_global_rng_alone(env: WordleEnvironment) -> None:
    random.seed(99)
    expected = random.random()
    random.seed(99)
    env.reset(seed=5)
    env.reset()
    assert random.random() == expected


def test_episode_id_default_is_unique_and_extra_kwargs_are_ignored(
    env: WordleEnvironment,
) -> None:
    env.reset(some_option=True, another=3)
    first = env.state.episode_id
    env.reset()
    assert first is not None
    assert env.state.episode_id not in (None, first)


def test_steps_work_before_any_reset(env: WordleEnvironment) -> None:
    obs = play(env, "[hello]")
    assert obs.done is (secret_of(env) == "hello")
    assert env.state.step_count == 1


def test_instances_are_independent() -> None:
    a, b = WordleEnvironment(), WordleEnvironment()
    a.reset(seed=3)
    b.reset(seed=3)
    play(a, "[hello]")
    assert len(a.state.raw_state["game_state"]["guess_history"]) == 1
    assert b.state.raw_state["game_state"]["guess_history"] == []
    assert b.state.step_count == 0


# --------------------------------------------------------------------- valid guesses


def test_feedback_message_and_reward_signals(crane_env: WordleEnvironment) -> None:
    obs = play(crane_env, "I will try [REACT] now")
    assert obs.done is False
    assert obs.reward == 0.0
    assert [(m.sender_id, m.category) for m in obs.messages] == [
        (0, "PLAYER_ACTION"),
        (-1, "GAME_MESSAGE"),
    ]
    assert obs.messages[0].content == "I will try [REACT] now"
    assert obs.messages[1].content == (
        "You submitted [react].\nFeedback:\nR E A C T\nY Y G Y X\nYou have 5 guesses left."
    )
    signals = {
        "wordle.greens": 0.2,
        "wordle.yellows": 0.6,
        "wordle.repetitions": 1.0,
        "wordle.correct": 0.0,
    }
    assert obs.info == {"reward_signals": signals}
    assert obs.metadata == {"env_id": "Wordle-v0", "turn": 1, "reward_signals": signals}

    state = crane_env.state
    assert state.turn == 1
    assert state.step_count == 1
    assert state.last_info == {"reward_signals": signals}
    assert state.raw_state["game_state"]["guess_history"] == [["react", list("YYGYX")]]
    assert state.raw_state["reward_signals"] == signals


def test_bare_word_is_a_guess(crane_env: WordleEnvironment) -> None:
    obs = play(crane_env, "react")
    assert obs.messages[0].content == "[react]"
    assert obs.messages[1].category == "GAME_MESSAGE"


def test_win_gives_reward_one_and_done(crane_env: WordleEnvironment) -> None:
    play(crane_env, "[react]")
    obs = play(crane_env, "[crane]")
    assert obs.done is True
    assert obs.reward == 1.0
    assert obs.info["reason"] == "Congratulations! You guessed the word correctly!"
    assert obs.info["invalid_move"] is False
    assert obs.info["reward_signals"]["wordle.correct"] == 1.0
    assert obs.info["reward_signals"]["wordle.greens"] == 1.0
    # A win prints nothing: the turn holds only the player's message.
    assert obs.messages == [WordleMessage(sender_id=0, content="[crane]", category="PLAYER_ACTION")]
    state = crane_env.state
    assert state.last_reward == 1.0
    assert state.turn == 2
    assert state.raw_state["done"] is True
    assert state.raw_state["rewards"] == {"0": 1.0}


def test_win_with_any_seed(env: WordleEnvironment) -> None:
    for seed in range(5):
        env.reset(seed=seed)
        obs = play(env, f"[{secret_of(env)}]")
        assert (obs.done, obs.reward) == (True, 1.0)


def test_six_wrong_guesses_end_with_partial_credit(env: WordleEnvironment) -> None:
    env.reset(seed=11)
    secret = secret_of(env)
    guesses = wrong_words(secret, 6)
    for n, guess in enumerate(guesses[:5], start=1):
        obs = play(env, f"[{guess}]")
        assert (obs.done, obs.reward) == (False, 0.0)
        assert obs.messages[-1].content.endswith(f"You have {6 - n} guesses left.")
    obs = play(env, f"[{guesses[5]}]")
    assert obs.done is True
    assert obs.reward == completion(guesses[5], secret)
    assert obs.messages[-1].content.endswith("You have 0 guesses left.")
    assert obs.info["reason"].startswith("The turn limit has been reached.")
    assert obs.info["reason"].endswith(f"The secret word was: **{secret}**.")
    assert obs.info["invalid_move"] is False
    assert obs.info["reward_signals"]["wordle.correct"] == obs.reward


def test_partial_credit_counts_greens_and_half_yellows(crane_env: WordleEnvironment) -> None:
    for guess in ("hello", "world", "about", "mummy", "pizza"):
        play(crane_env, f"[{guess}]")
    obs = play(crane_env, "[react]")  # Y Y G Y X
    assert obs.done is True
    assert obs.reward == pytest.approx(0.5)
    assert "matched 50% of the letters" in obs.info["reason"]


def test_secret_word_is_not_in_observations_before_the_end(env: WordleEnvironment) -> None:
    env.reset(seed=5)
    secret = secret_of(env)
    for guess in wrong_words(secret, 3):
        obs = play(env, f"[{guess}]")
        text = "".join(m.content for m in obs.messages)
        assert secret not in text
        assert secret not in repr(obs.info) + repr(obs.metadata)


def test_step_after_the_end_changes_nothing(crane_env: WordleEnvironment) -> None:
    final = play(crane_env, "[crane]")
    obs = play(crane_env, "[react]")
    assert obs.done is True
    assert obs.reward == 0.0
    assert obs.messages == []  # nothing was said since the final observation
    assert obs.prompt == final.prompt
    assert obs.info == {"reason": final.info["reason"], "invalid_move": False}
    state = crane_env.state
    assert state.step_count == 2
    assert state.turn == 1
    assert state.raw_state["rewards"] == {"0": 1.0}
    assert state.raw_state["game_state"]["guess_history"] == [["crane", list("GGGGG")]]


# --------------------------------------------------------------------- per-turn messages


def test_messages_hold_only_the_latest_turn(crane_env: WordleEnvironment) -> None:
    """As raw TextArena's get_observation(): each observation brings only what is new."""
    obs = crane_env.reset()
    assert [m.category for m in obs.messages] == ["PROMPT"]
    turns = [
        ("[react]", ["PLAYER_ACTION", "GAME_MESSAGE"], "You have 5 guesses left."),
        ("[zzzzz]", ["PLAYER_ACTION", "GAME_ADMIN"], "to avoid penalties."),
        ("[hello]", ["PLAYER_ACTION", "GAME_MESSAGE"], "You have 4 guesses left."),
    ]
    for message, categories, ending in turns:
        obs = play(crane_env, message)
        assert [m.category for m in obs.messages] == categories
        assert [m.sender_id for m in obs.messages] == [0, -1]
        assert obs.messages[0].content == message
        assert obs.messages[1].content.endswith(ending)
        assert "PROMPT" not in {m.category for m in obs.messages}
        assert obs.prompt == "Wordle-v0"  # as upstream: the instructions come with reset only
    # The whole history stays in the state.
    history = crane_env.state.raw_state["game_state"]["guess_history"]
    assert [word for word, _ in history] == ["react", "hello"]


def test_messages_do_not_grow_with_the_episode(env: WordleEnvironment) -> None:
    env.reset(seed=2)
    sizes = [
        len(msgpack.packb(play(env, f"[{w}]").model_dump())) for w in wrong_words(secret_of(env), 5)
    ]
    assert max(sizes) - min(sizes) < 20  # only the digits and the guessed word differ


def test_gymnasium_text_is_the_games_latest_reply(crane_env: WordleEnvironment) -> None:
    """The Gymnasium observation (spaces.py): the game's messages after the player's last."""
    decode = codec_for("wordle").decode_observation
    first = crane_env.reset()
    assert decode(first.model_dump()) == first.prompt
    text = decode(play(crane_env, "[react]").model_dump())
    assert text == (
        "You submitted [react].\nFeedback:\nR E A C T\nY Y G Y X\nYou have 5 guesses left."
    )
    text = decode(play(crane_env, "crane please").model_dump())
    assert text.startswith(ADMIN_PREFIX + "You tried submitting a word in the wrong format.")
    text = decode(play(crane_env, "[hello]").model_dump())
    assert text.startswith("You submitted [hello].\nFeedback:\nH E L L O\n")
    assert "react" not in text  # earlier turns are not repeated
    # A win prints no message: the text is the game's last word on it (info's reason),
    # not the wire's prompt (the env id after reset)
    win = play(crane_env, "[crane]")
    assert win.prompt == "Wordle-v0"
    assert decode(win.model_dump()) == "Congratulations! You guessed the word correctly!"


# --------------------------------------------------------------------- invalid moves


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            "my guess is crane",
            "You tried submitting a word in the wrong format. "
            "Please make sure to use squared brackets.",
        ),
        ("I guess [crane", "You tried submitting a word in the wrong format."),
        ("[cat]", "Your word must be exactly 5 letters."),
        ("[cranes]", "Your word must be exactly 5 letters."),
        ("[zzzzz]", "'zzzzz' is not an English word."),
        ("[abc12]", "'abc12' is not an English word."),
    ],
)
def test_first_invalid_move_is_a_warning(
    crane_env: WordleEnvironment, message: str, reason: str
) -> None:
    obs = play(crane_env, message)
    assert obs.done is False
    assert obs.reward == 0.0
    assert [m.category for m in obs.messages] == ["PLAYER_ACTION", "GAME_ADMIN"]
    admin = obs.messages[1]
    assert admin.sender_id == -1
    assert admin.content.startswith(ADMIN_PREFIX + reason)
    assert admin.content.endswith(
        "Please resubmit a valid move and remember to follow the game rules to avoid penalties."
    )
    assert "reason" not in obs.info
    state = crane_env.state
    assert state.turn == 0
    assert state.raw_state["error_count"] == 1
    assert state.raw_state["game_state"]["guess_history"] == []


def test_second_consecutive_invalid_move_ends_the_game(crane_env: WordleEnvironment) -> None:
    play(crane_env, "[react]")  # completion 0.5
    play(crane_env, "no brackets here")
    obs = play(crane_env, "[zzzzz]")
    assert obs.done is True
    assert obs.reward == pytest.approx(0.5)
    assert obs.info["reason"] == "Invalid Move: 'zzzzz' is not an English word."
    assert obs.info["invalid_move"] is True
    assert obs.messages == [WordleMessage(sender_id=0, content="[zzzzz]", category="PLAYER_ACTION")]
    state = crane_env.state
    assert state.turn == 2  # the losing move counts as a turn, as in TextArena
    assert state.raw_state["game_info"]["0"]["invalid_move"] is True


def test_invalid_moves_without_a_valid_guess_score_zero(crane_env: WordleEnvironment) -> None:
    play(crane_env, "[cat]")
    obs = play(crane_env, "[dog]")
    assert (obs.done, obs.reward) == (True, 0.0)


def test_valid_guess_resets_the_error_count(crane_env: WordleEnvironment) -> None:
    assert play(crane_env, "[zzzzz]").done is False
    assert play(crane_env, "[react]").done is False
    assert play(crane_env, "[qqqqq]").done is False
    assert play(crane_env, "[hello]").done is False
    assert play(crane_env, "[xxxxx]").done is False
    assert play(crane_env, "[yyyyy]").done is True


def test_invalid_moves_use_no_guess(crane_env: WordleEnvironment) -> None:
    guesses = ["hello", "world", "about", "mummy", "pizza", "react"]
    for guess in guesses[:5]:
        assert play(crane_env, "[zzzzz]").done is False
        obs = play(crane_env, f"[{guess}]")
        assert obs.done is False
    obs = play(crane_env, f"[{guesses[5]}]")
    assert obs.done is True
    assert crane_env.state.turn == 6
    assert crane_env.state.step_count == 11


def test_repeated_guess_is_invalid(crane_env: WordleEnvironment) -> None:
    play(crane_env, "[react]")
    obs = play(crane_env, "[REACT]")
    assert obs.done is False
    assert obs.messages[-1].content.startswith(
        ADMIN_PREFIX + "You have already guessed 'react' before. Please try a different word."
    )
    assert obs.info["reward_signals"]["wordle.repetitions"] == 0.0
    # greens/yellows still describe the latest valid guess
    assert obs.info["reward_signals"]["wordle.greens"] == 0.2
    obs = play(crane_env, "[react]")
    assert obs.done is True
    assert obs.info["reason"].startswith("Invalid Move: You have already guessed 'react'")
    assert obs.info["reward_signals"]["wordle.repetitions"] == -1.0


def test_role_tags_are_stripped_from_the_echoed_action(crane_env: WordleEnvironment) -> None:
    obs = play(crane_env, "[GAME]hi [react]")
    # The guess is the first [word]: "GAME" is six letters, so this move is invalid.
    assert obs.messages[0].content == "hi [react]"
    assert obs.messages[1].content.startswith(ADMIN_PREFIX + "Your word must be exactly 5")


def reference_parse(message: str) -> tuple[str, str | None]:
    """TextArena's reading of a move, written plainly: (the echo, the guess or None)."""
    if "[" not in message and "]" not in message:
        message = f"[{message}]"
    shown = message
    for tag in ("[Player]", "[GAME]"):
        shown = shown.replace(tag, "")
    match = re.search(r"\[(\w+)\]", message)
    return shown, None if match is None else match.group(1).lower()


@pytest.mark.parametrize(
    "message",
    [
        "[react]",
        "react",
        "[REACT]",
        "REACT",
        "[Player]",
        "Player",
        "[GAME]",
        "GAME",
        "[player]",
        "game",
        "[Player] [react]",
        "[GAME][react][Player]",
        "[Pla[GAME]yer] x",
        "[Player]Player[GAME]",
        "[[react]]",
        " [react] ",
        "[react]\n",
        "[ react]",
        "[react",
        "react]",
        "]",
        "[",
        "[]",
        "",
        "re act",
        "re_act",
        "[re_act]",
        "[abc12]",
        "12345",
        "[héllo]",
        "héllo",
        "[ÉCLAT]",
        "Ⅻabcd",
        "[react] [crane]",
        "I guess [react] now",
    ],
)
def test_echo_and_guess_are_read_as_textarena_reads_them(
    crane_env: WordleEnvironment, message: str
) -> None:
    shown, word = reference_parse(message)
    obs = play(crane_env, message)
    assert obs.messages[0] == WordleMessage(sender_id=0, content=shown, category="PLAYER_ACTION")
    reply = obs.messages[1].content if len(obs.messages) > 1 else ""
    if word is None:
        assert reply.startswith(ADMIN_PREFIX + "You tried submitting a word in the wrong format.")
    elif len(word) != 5:
        assert reply.startswith(ADMIN_PREFIX + "Your word must be exactly 5 letters.")
    elif word == "crane":
        assert obs.reward == 1.0
    elif word in valid_words():
        assert reply.startswith(f"You submitted [{word}].")
    else:
        assert reply.startswith(ADMIN_PREFIX + f"'{word}' is not an English word.")


def test_a_word_resubmitted_after_an_invalid_move_keeps_its_own_reason(
    crane_env: WordleEnvironment,
) -> None:
    # only a valid guess counts as guessed before; every submission counts as a repetition
    obs = play(crane_env, "[zzzzz]")
    assert obs.info["reward_signals"]["wordle.repetitions"] == 1.0
    play(crane_env, "[react]")
    obs = play(crane_env, "[zzzzz]")
    assert obs.messages[1].content.startswith(ADMIN_PREFIX + "'zzzzz' is not an English word.")
    assert obs.info["reward_signals"]["wordle.repetitions"] == 0.0
    play(crane_env, "[hello]")
    obs = play(crane_env, "[cat]")
    assert obs.messages[1].content.startswith(ADMIN_PREFIX + "Your word must be exactly 5")
    play(crane_env, "[mummy]")
    obs = play(crane_env, "[cat]")
    assert obs.messages[1].content.startswith(ADMIN_PREFIX + "Your word must be exactly 5")
    assert obs.info["reward_signals"]["wordle.repetitions"] == 0.0
    assert [w for w, _ in crane_env.state.raw_state["game_state"]["guess_history"]] == [
        "react",
        "hello",
        "mummy",
    ]


# --------------------------------------------------------------------- wire models


def test_schema_field_names_match_openenv_textarena() -> None:
    def props(model: type[BaseModel]) -> set[str]:
        return set(model.model_json_schema()["properties"])

    assert props(WordleAction) == {"message", "metadata"}
    assert WordleAction.model_json_schema()["required"] == ["message"]
    assert props(WordleMessage) == {"sender_id", "content", "category"}
    assert props(WordleObservation) == {
        "done",
        "reward",
        "metadata",
        "prompt",
        "messages",
        "current_player_id",
        "legal_players",
        "info",
    }
    assert WordleObservation.model_json_schema()["required"] == ["prompt"]
    assert props(WordleState) == {
        "episode_id",
        "step_count",
        "env_id",
        "num_players",
        "max_turns",
        "turn",
        "last_reward",
        "last_info",
        "raw_state",
    }
    assert TextArenaAction is WordleAction
    assert TextArenaObservation is WordleObservation


def test_action_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        WordleAction.model_validate({"message": "[crane]", "guess": "crane"})


def test_class_attributes_and_metadata(env: WordleEnvironment) -> None:
    assert isinstance(env, Environment)
    assert WordleEnvironment.action_type is WordleAction
    assert WordleEnvironment.observation_type is WordleObservation
    assert WordleEnvironment.state_type is WordleState
    assert WordleEnvironment.SUPPORTS_CONCURRENT_SESSIONS is True
    meta = env.get_metadata()
    assert meta.name == "WordleEnvironment"
    assert "Wordle" in meta.description


def test_observation_and_state_round_trip_through_json(crane_env: WordleEnvironment) -> None:
    obs = play(crane_env, "[react]")
    assert WordleObservation.model_validate_json(obs.model_dump_json()) == obs
    state = crane_env.state
    assert WordleState.model_validate_json(state.model_dump_json()) == state


def containers(obj: Any) -> dict[int, Any]:
    """Every mutable container reachable from ``obj``, by id (frozen models are values)."""
    found: dict[int, Any] = {}

    def walk(value: Any) -> None:
        if isinstance(value, BaseModel):
            if value.model_config.get("frozen"):
                return
            found[id(value)] = value
            found[id(value.__dict__)] = value.__dict__
            found[id(value.model_fields_set)] = value.model_fields_set
            for item in value.__dict__.values():
                walk(item)
        elif isinstance(value, dict):
            found[id(value)] = value
            for item in value.values():
                walk(item)
        elif isinstance(value, list | set):
            found[id(value)] = value
            for item in value:
                walk(item)
        elif isinstance(value, tuple):
            for item in value:
                walk(item)

    walk(obj)
    return found


def test_observations_share_no_mutable_object(crane_env: WordleEnvironment) -> None:
    """Gymnasium checks that returned data is never reused: nothing may be shared."""
    observations = [crane_env.reset(seed=1)]
    for message in ["[react]", "oops", "[react]", "[hello]", "[crane]", "[world]"]:
        observations.append(play(crane_env, message))
        internal = containers({k: v for k, v in vars(crane_env).items() if k != "_rng"})
        assert not containers(observations[-1]).keys() & internal.keys()
        assert not containers(crane_env.state).keys() & internal.keys()
    seen: dict[int, Any] = {}
    for obs in observations:
        mine = containers(obs)
        assert not mine.keys() & seen.keys()
        seen.update(mine)
        assert obs.info is not obs.metadata
        if "reward_signals" in obs.info:
            assert obs.info["reward_signals"] is not obs.metadata["reward_signals"]


def test_observations_are_what_validation_would_build(crane_env: WordleEnvironment) -> None:
    """Observations skip validation; they must still equal and dump as validated ones."""
    observations = [crane_env.reset(seed=1)]
    # a valid guess, a warning, a losing invalid move, a step after the end; then a win
    observations += [play(crane_env, m) for m in ["[react]", "oops", "[zzzzz]", "[react]"]]
    observations += [crane_env.reset(), play(crane_env, "[crane]")]
    assert [obs.done for obs in observations] == [False, False, False, True, True, False, True]
    for obs in observations:
        dumped = obs.model_dump()
        validated = WordleObservation.model_validate(dumped)
        assert obs == validated
        assert (
            obs.model_fields_set
            == validated.model_fields_set
            == set(WordleObservation.model_fields)
        )
        assert list(dumped) == list(validated.model_dump())
        assert obs.model_dump_json() == validated.model_dump_json()
        assert [m.model_fields_set for m in obs.messages] == [
            m.model_fields_set for m in validated.messages
        ]
        assert obs.model_dump(exclude={"reward", "done", "metadata"}) == validated.model_dump(
            exclude={"reward", "done", "metadata"}
        )


MESSAGE_VALUES = {"sender_id": 0, "content": "x", "category": "PROMPT"}
OBSERVATION_VALUES = {
    "done": True,
    "reward": 0.5,
    "metadata": {"turn": 1},
    "prompt": "p",
    "messages": [WordleMessage(sender_id=0, content="x", category="PROMPT")],
    "current_player_id": 0,
    "legal_players": [0],
    "info": {"reason": "r"},
}


@pytest.mark.parametrize(
    ("model", "values"),
    [(WordleMessage, MESSAGE_VALUES), (WordleObservation, OBSERVATION_VALUES)],
)
def test_trusted_builds_what_validation_builds(
    model: type[BaseModel], values: dict[str, Any]
) -> None:
    # Nothing that model_construct would have to handle, and trusted() does not.
    assert not model.__private_attributes__
    assert model.__pydantic_post_init__ is None
    assert model.model_config.get("extra") != "allow"
    built = trusted(model, dict(values))
    validated = model(**values)
    assert built == validated
    assert repr(built) == repr(validated)
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_dump() == validated.model_dump()
    assert built.__pydantic_extra__ == validated.__pydantic_extra__
    assert built.__pydantic_private__ == validated.__pydantic_private__


# ------------------------------------------------ the batched hooks (docs/protocol.md 3.9)


def _same_wire(
    batch_envs: list[WordleEnvironment],
    model_envs: list[WordleEnvironment],
    batch: Any,
    observations: list[WordleObservation],
) -> None:
    """The hook's batch is what the runtime would send for the per-instance observations."""
    from openenv_gym.runtime.columns import batch_table, result_table

    assert not batch.errors
    n = len(observations)
    from_models = result_table(observations)
    from_batch = batch_table(batch, WordleObservation, [None] * n, list(range(n)))
    assert from_batch.numeric == from_models.numeric
    assert from_batch.rewards.tolist() == from_models.rewards.tolist()
    assert from_batch.dones.tolist() == from_models.dones.tolist()
    assert from_batch.metadata == from_models.metadata
    assert set(from_batch.observations) == set(from_models.observations)
    for name, column in from_models.observations.items():
        other = from_batch.observations[name]
        if hasattr(column, "tolist"):
            assert column.tolist() == other.tolist(), name
        else:
            assert column == other, name
    for a, b in zip(batch_envs, model_envs, strict=True):
        assert a.state == b.state


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_batch_and_reset_batch_give_what_step_and_reset_give(seed: int) -> None:
    rng = random.Random(seed)
    n = 6
    batch_envs = [WordleEnvironment() for _ in range(n)]
    model_envs = [WordleEnvironment() for _ in range(n)]
    words = sorted(valid_words())
    for episode in range(3):
        seeds = [rng.randrange(1000) for _ in range(n)]
        kwargs = [{"seed": s, "episode_id": f"ep-{episode}-{i}"} for i, s in enumerate(seeds)]
        batch = WordleEnvironment.reset_batch(batch_envs, kwargs)
        observations = [e.reset(**k) for e, k in zip(model_envs, kwargs, strict=True)]
        _same_wire(batch_envs, model_envs, batch, observations)
        for _ in range(9):  # past the end of most games: steps after done are covered too
            messages = [
                rng.choice(
                    [
                        f"[{rng.choice(words)}]",
                        rng.choice(words),
                        "no brackets here",
                        "[xyz]",
                        f"[{secret_of(e)}]",
                        "[Player] [crane] [GAME]",
                    ]
                )
                for e in model_envs
            ]
            actions = [WordleAction(message=m) for m in messages]
            batch = WordleEnvironment.step_batch(batch_envs, actions)
            observations = [e.step(a) for e, a in zip(model_envs, actions, strict=True)]
            _same_wire(batch_envs, model_envs, batch, observations)


def test_reset_batch_fails_only_the_game_that_raised() -> None:
    envs = [WordleEnvironment(), WordleEnvironment()]
    batch = WordleEnvironment.reset_batch(envs, [{"seed": 1}, {"seed": [1, 2]}])  # unhashable seed
    assert set(batch.errors) == {1}
    assert batch.fields["prompt"][0].startswith("You are Playing Wordle")
