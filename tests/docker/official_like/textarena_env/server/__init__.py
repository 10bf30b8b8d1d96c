"""The TextArena-style environment's server."""
