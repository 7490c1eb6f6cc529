"""Signers: the one place a wallet's key is used, and only for EIP-3009 typed data."""
