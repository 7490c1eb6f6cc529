"""The chain: read-only JSON-RPC to check that a payment really settled, and wallets' balances."""
