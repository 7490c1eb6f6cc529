"""The catalog's errors: stable codes and fixed messages, for operators' commands."""

from __future__ import annotations

from server.kit.errors import PaywardenError


class HostAlreadyListed(PaywardenError):
    code = "host_already_listed"
    message = "That host is already in the catalog."


class EntryNotFound(PaywardenError):
    code = "catalog_entry_not_found"
    message = "No catalog entry has that id or host."


class NotACandidate(PaywardenError):
    code = "not_a_candidate"
    message = "That entry is already accepted: change it with `admin catalog edit`."


class PayeesUnknown(PaywardenError):
    code = "payees_unknown"
    message = (
        "No verification has seen this seller's payees yet: verify it first, or name them with --pay-to, "
        "or accept it as rotating with --rotating."
    )


class SeedFileInvalid(PaywardenError):
    code = "seed_file_invalid"
    message = "The seed file could not be read: it must be the JSON document the README describes."


class DiscoveryUnreadable(PaywardenError):
    code = "discovery_unreadable"
    message = "The discovery endpoint did not answer a readable list of resources."
