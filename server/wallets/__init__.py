"""Wallets: which address an agent pays from, and the sealed secret that signs for it."""
