"""The echo tool server."""

from .echo_environment import EchoToolEnvironment

__all__ = ["EchoToolEnvironment"]
