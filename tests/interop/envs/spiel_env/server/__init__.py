"""The spiel server."""
