"""Errors of the exchange with a seller, each with its stable tool error code."""

from __future__ import annotations

from server.kit.errors import PaywardenError


class SellerUnreachable(PaywardenError):
    code = "seller_unreachable"
    message = "The URL could not be reached, so nothing was paid."


class SellerTimeout(PaywardenError):
    code = "seller_timeout"
    message = "The URL did not answer in time, so nothing was paid."


class PrivateAddressBlocked(PaywardenError):
    code = "private_address_blocked"
    message = "The URL resolves to a private, loopback or link-local address, so nothing was sent."


class ResponseLost(Exception):
    """The request left, but no complete answer came back (connection dropped, deadline passed)."""
