"""Sweeps: what is left in a retired wallet moved to its agent's current wallet, by one EIP-3009
authorisation the ledger authorised, recorded and signed through the wallet's signer, then found
on-chain as a payment's settlement is. `records.py` holds each durable step, `sweeper.py` runs
them in order (and again, from where a run stopped), `listing.py` shows an agent's wallets."""
