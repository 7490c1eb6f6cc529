"""The x402 buyer side: read a seller's challenge, choose what to pay, build the signed payload.

Pure protocol code: no HTTP, no database, no keys. The payments domain drives it.
"""
