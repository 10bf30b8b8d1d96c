"""An MCP echo in the layout of upstream's ``echo_env`` (two FastMCP tools).

Test fixture, not a test module.
"""
