"""The catalog of listed x402 sellers, and what the policy's catalog rules read from it."""
