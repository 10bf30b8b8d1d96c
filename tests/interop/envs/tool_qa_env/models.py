"""The state of the tool QA environment (its actions are MCP tool calls)."""

from openenv.core.env_server import State

AVAILABLE_TOOLS = ["get_descriptions", "get_table_info", "sql_query", "submit_answer"]


class ToolQAState(State):
    """What an episode is about: the question, its company and the expected answer."""

    current_question: str = ""
    current_company: str = ""
    ground_truth: str = ""
    question_id: str = ""
