"""The chain, read-only: JSON-RPC calls that find a payment's settlement in token logs, read
balances and list a wallet's movements. A pure adapter: it knows nothing of the ledger."""
