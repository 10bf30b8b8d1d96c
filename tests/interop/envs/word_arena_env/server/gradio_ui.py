"""A custom web tab (never built by the tests: no ENABLE_WEB_INTERFACE)."""

from typing import Any


def build_word_arena_gradio_app(*args: Any, **kwargs: Any) -> Any:
    """Upstream builds a Gradio tab here."""
    raise RuntimeError("the web interface is not part of these tests")
