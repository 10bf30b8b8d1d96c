"""The grid world's server."""
