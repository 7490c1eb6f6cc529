"""Organisations and their agents: who exists, and which organisation owns what."""
