"""The echo environment's server."""
