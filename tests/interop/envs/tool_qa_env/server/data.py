"""A tiny in-memory data set: two companies, their tables, and questions about them."""

from __future__ import annotations

import json
from typing import Any

TABLES: dict[str, dict[str, list[dict[str, Any]]]] = {
    "acme": {
        "revenue": [
            {"year": 2022, "segment": "tools", "amount": 120},
            {"year": 2023, "segment": "tools", "amount": 150},
            {"year": 2023, "segment": "parts", "amount": 80},
        ],
        "staff": [{"year": 2023, "count": 42}],
    },
    "globex": {
        "revenue": [
            {"year": 2023, "segment": "energy", "amount": 300},
            {"year": 2024, "segment": "energy", "amount": 330},
        ],
    },
}

QUESTIONS: list[dict[str, str]] = [
    {"id": "q0", "company": "acme", "question": "Tools revenue in 2023?", "answer": "150"},
    {"id": "q1", "company": "globex", "question": "Energy revenue in 2024?", "answer": "330"},
    {"id": "q2", "company": "acme", "question": "Staff count in 2023?", "answer": "42"},
]


def descriptions(company: str) -> str:
    """The table names of a company, as JSON."""
    return json.dumps(sorted(TABLES.get(company, {})))


def table_info(company: str, table: str) -> str:
    """A table's columns and row count, as JSON."""
    rows = TABLES.get(company, {}).get(table)
    if rows is None:
        return json.dumps({"error": f"no table {table!r} for {company!r}"})
    return json.dumps({"columns": sorted(rows[0]), "rows": len(rows)})


def query(company: str, table: str, where: str) -> str:
    """Rows whose ``column=value`` filter matches (a stand-in for SQL), as JSON."""
    if "=" not in where:
        return json.dumps({"error": "a filter column=value is required"})
    column, _, value = where.partition("=")
    rows = TABLES.get(company, {}).get(table, [])
    return json.dumps([r for r in rows if str(r.get(column.strip())) == value.strip()])
