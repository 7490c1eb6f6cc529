"""Signers: the one place a wallet's key is opened and used, and only for an authorised intent."""
