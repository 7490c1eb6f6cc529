"""Wallet policies: an agent's policy compiled into its `cdp` wallet's own policy at Coinbase CDP,
kept in step, and checked for drift."""
