"""Approvals: payments held for a human, and the human's decision."""
