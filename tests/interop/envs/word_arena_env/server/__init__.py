"""The word arena server."""
