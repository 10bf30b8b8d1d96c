"""The Wordle word lists and the letter-feedback rule.

The lists live in ``data/`` beside this module (see ``data/README.md`` for their source and
licence). Each is read from disk at most once per process, on first use, and then shared by
every environment instance: opening a session never touches the disk.

Example:
    >>> score_guess("crane", "caner")
    ('G', 'Y', 'Y', 'Y', 'Y')
    >>> score_guess("eerie", "crane")
    ('X', 'X', 'Y', 'X', 'G')
    >>> "crane" in valid_words() and "crane" in secret_words()
    True
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["feedback_line", "score_guess", "secret_words", "valid_words"]

GREEN = "G"
YELLOW = "Y"
GREY = "X"


def _read_words(name: str) -> list[str]:
    text = resources.files(__package__).joinpath("data", name).read_text(encoding="ascii")
    return text.split()


@functools.cache
def secret_words() -> tuple[str, ...]:
    """Return the words the game draws its secret from, in a fixed (sorted) order.

    The order is part of seeding: the same seed picks the same index, so the same word.
    """
    return tuple(_read_words("secret_words.txt"))


@functools.cache
def valid_words() -> frozenset[str]:
    """Return every word accepted as a guess (always includes :func:`secret_words`)."""
    return frozenset(_read_words("valid_words.txt")).union(secret_words())


def score_guess(guess: str, secret: str) -> tuple[str, ...]:
    """Return Wordle feedback for ``guess``: one of ``G``, ``Y``, ``X`` per letter.

    Two passes, as in TextArena: letters in the right place are marked ``G`` first and use up
    that letter of the secret; then, left to right, a letter still unused somewhere in the
    secret is ``Y`` (and uses up its first unused occurrence), anything else is ``X``. So a
    letter guessed twice is marked at most as many times as the secret holds it.

    Args:
        guess: The guessed word, same length as ``secret``.
        secret: The secret word.

    Returns:
        The feedback, one letter per position.

    Raises:
        ValueError: If the two words differ in length.
    """
    if guess == secret:
        return (GREEN,) * len(secret)
    if len(guess) != len(secret):
        raise ValueError(f"guess {guess!r} and secret {secret!r} differ in length")
    feedback = [GREY] * len(secret)
    unused = secret  # the secret's letters not yet used by a G or Y (only counts matter)
    for i, g in enumerate(guess):
        if g == secret[i]:
            feedback[i] = GREEN
            unused = unused.replace(g, "", 1)
    for i, g in enumerate(guess):
        if feedback[i] is GREY and g in unused:
            feedback[i] = YELLOW
            unused = unused.replace(g, "", 1)
    return tuple(feedback)


_ALL_GREEN_LINE = "G G G G G"


def feedback_line(guess: str, secret: str) -> str:
    """Return :func:`score_guess`'s feedback as the game prints it: letters joined by spaces.

    The same rule, faster for five-letter words: when no letter repeats in the guess, a letter
    not in its place is ``Y`` exactly when the secret holds it (no ``G`` or earlier ``Y`` can
    have used that letter up), so one pass decides. Other guesses go through
    :func:`score_guess`.

    Args:
        guess: The guessed word, same length as ``secret``.
        secret: The secret word.

    Returns:
        ``" ".join(score_guess(guess, secret))``.

    Raises:
        ValueError: If the two words differ in length.

    Example:
        >>> feedback_line("eerie", "crane")
        'X X Y X G'
    """
    if guess == secret:
        return _ALL_GREEN_LINE if len(secret) == 5 else " ".join(GREEN * len(secret))
    try:  # letter by letter (mypy flags any unpacking of a str: here it is the point)
        a, b, c, d, e = guess  # type: ignore[str-unpack]
        p, q, r, s, t = secret  # type: ignore[str-unpack]
    except ValueError:  # not two five-letter words
        return " ".join(score_guess(guess, secret))
    if len({a, b, c, d, e}) < 5:  # a letter repeats
        return " ".join(score_guess(guess, secret))
    return (
        f"{'G' if a == p else 'Y' if a in secret else 'X'} "
        f"{'G' if b == q else 'Y' if b in secret else 'X'} "
        f"{'G' if c == r else 'Y' if c in secret else 'X'} "
        f"{'G' if d == s else 'Y' if d in secret else 'X'} "
        f"{'G' if e == t else 'Y' if e in secret else 'X'}"
    )
