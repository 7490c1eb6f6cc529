"""The web entry point: discovery documents, the authorization server's endpoints, members' pages
and health."""
