"""What the MCP tools return: one pydantic model per tool result, built from domain objects.

Each tool declares its output schema with its model from here, and renders its result through
it, so the wire shape lives in one place and the domain never builds a tool's dictionary.
"""
