"""The MCP endpoint: bearer authentication, the tools, and how results and errors are rendered.

Tool handlers are thin: validate input, read the principal, call one domain service, render.
"""
