"""One module per tool; each exposes `register(mcp, services)`."""
