"""The tool QA server."""
