"""A tool-calling question-answering environment in the shape of upstream's ``finqa_env``.

Test fixture, not a test module. Served by OpenEnv's ``create_app`` under uvicorn, and by
``openenv-gym serve --app-dir`` (``tests/interop/test_interop_official_apps.py``).
"""

from .models import AVAILABLE_TOOLS, ToolQAState

__all__ = ["AVAILABLE_TOOLS", "ToolQAState"]
