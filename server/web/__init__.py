"""Plain HTTP endpoints: discovery documents and health."""
