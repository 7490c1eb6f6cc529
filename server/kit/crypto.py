"""The master key, AES-256-GCM sealing of secrets at rest (wallet keys, Slack webhooks, a pending
change's result, the audit chain's key once the master key was rotated), and keys derived from it for
one purpose each (CSRF tokens, refresh-token successors).

The key is `pwmk_` + base64url of 32 random bytes: a format that never looks like a wallet key,
so the "private-key-looking value" guard on configuration cannot confuse the two. Other keys
(the audit chain's, the key check value a database keeps) are derived from it with HKDF-SHA256,
one purpose label each, so none of them reveals the master key or another derived key.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
import stat
import tempfile
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MASTER_KEY_PREFIX = "pwmk_"
_NONCE_BYTES = 12
_SEAL_VERSION = b"\x01"
KEY_CHECK_PURPOSE = "paywarden/master-key-check/v1"
KEY_ID_LENGTH = 16


def key_id_of(check_value: str) -> str:
    return check_value[:KEY_ID_LENGTH]


# The context a wallet key is sealed under begins with this: such a value opens only in the signer.
SIGNER_ONLY_CONTEXT_PREFIX = "wallet:"


class MasterKeyError(ValueError):
    pass


class MasterKeyMissing(MasterKeyError):
    """No master key is configured and none may be created here."""


class SealError(ValueError):
    """A sealed value could not be opened: wrong key, wrong context, or tampered bytes."""


class MasterKey:
    def __init__(self, raw: bytes) -> None:
        if len(raw) != 32:
            raise MasterKeyError("the master key must be 32 bytes")
        self._aead = AESGCM(raw)
        self._raw = raw

    @classmethod
    def parse(cls, text: str) -> MasterKey:
        text = text.strip()
        if not text.startswith(MASTER_KEY_PREFIX):
            raise MasterKeyError("PAYWARDEN_MASTER_KEY must start with pwmk_")
        body = text[len(MASTER_KEY_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError) as exc:
            raise MasterKeyError("PAYWARDEN_MASTER_KEY is not valid base64url") from exc
        if len(raw) != 32:
            raise MasterKeyError("PAYWARDEN_MASTER_KEY must hold exactly 32 bytes")
        return cls(raw)

    @classmethod
    def generate(cls) -> MasterKey:
        return cls(secrets.token_bytes(32))

    def derive(self, purpose: str) -> bytes:
        """A 32-byte key of its own for one purpose (HKDF-SHA256, the purpose as its info), so no
        purpose ever uses the master key itself and every process that holds it derives the same."""
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode()).derive(self._raw)

    def check_value(self) -> str:
        """What a database keeps to recognise this key without being able to recover it."""
        return self.derive(KEY_CHECK_PURPOSE).hex()

    @property
    def key_id(self) -> str:
        """A short public name of this key, recorded next to every value sealed with it: the first
        16 hex digits of its check value, so a database can name the key of any of its rows."""
        return key_id_of(self.check_value())

    def encode(self) -> str:
        return MASTER_KEY_PREFIX + base64.urlsafe_b64encode(self._raw).decode().rstrip("=")

    def seal(self, plaintext: bytes, *, context: str) -> bytes:
        """Encrypt `plaintext`, bound to `context` (e.g. the wallet id) as associated data."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return _SEAL_VERSION + nonce + self._aead.encrypt(nonce, plaintext, context.encode())

    def open(self, sealed: bytes, *, context: str) -> bytes:
        """Decrypt a value sealed under `context`. A wallet key never opens here: only the signer
        opens one (server/signers/key_material.py), so no other code can reach key material."""
        if context.startswith(SIGNER_ONLY_CONTEXT_PREFIX):
            raise SealError("a wallet key opens only in the signer")
        return self._decrypt(sealed, context=context)

    def _open_signer_secret(self, sealed: bytes, *, context: str) -> bytes:
        """Any sealed value, wallet keys included: called by the signer's key module alone
        (an import contract and tests/architecture/test_key_material.py hold that)."""
        return self._decrypt(sealed, context=context)

    def _decrypt(self, sealed: bytes, *, context: str) -> bytes:
        if len(sealed) < 1 + _NONCE_BYTES + 16 or sealed[:1] != _SEAL_VERSION:
            raise SealError("not a sealed value")
        nonce = sealed[1 : 1 + _NONCE_BYTES]
        try:
            return self._aead.decrypt(nonce, sealed[1 + _NONCE_BYTES :], context.encode())
        except InvalidTag as exc:
            raise SealError("the sealed value does not open with this master key") from exc


def read_master_key_file(path: Path) -> MasterKey:
    """Read a key file; a file other users can read is refused, a missing one is MasterKeyMissing."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        raise MasterKeyMissing(f"the master key file {path} does not exist") from None
    if mode & 0o077:
        raise MasterKeyError(f"{path} is readable by other users (mode {mode:o}); run: chmod 600 {path}")
    try:
        return MasterKey.parse(path.read_text())
    except MasterKeyError:
        raise MasterKeyError(f"the master key file {path} does not hold a master key (pwmk_...)") from None


def load_or_create_master_key_file(path: Path) -> MasterKey:
    """Read the key file, or create it (0600) holding a new key.

    Creation is atomic: the key is written to a private temporary file in the same directory,
    flushed to disk, then linked to its name, which fails if the name exists. A reader never sees
    an empty or partial file, and of several processes creating it at once, one wins and every
    other reads the winner's key.
    """
    if path.exists():
        return read_master_key_file(path)
    key = MasterKey.generate()
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key.encode() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return read_master_key_file(path)  # another process made it first: use theirs
        _fsync_directory(path.parent)
        return key
    finally:
        os.unlink(temporary)


def pending_master_key_file(path: Path) -> Path:
    """Where a rotation writes the new key before the database takes it (`<key file>.new`)."""
    return path.with_name(path.name + ".new")


def write_pending_master_key_file(path: Path, key: MasterKey) -> Path:
    """Write `key` (0600, flushed to disk) beside the key file at `path`, not over it: the database
    still belongs to the old key until the rotation commits. A file left there by an earlier
    rotation that did not commit is replaced."""
    pending = pending_master_key_file(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key.encode() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, pending)
    except BaseException:
        os.unlink(temporary)
        raise
    _fsync_directory(path.parent)
    return pending


def install_master_key_file(pending: Path, path: Path) -> None:
    """Put the pending key file in place of the key file, atomically (once the rotation committed)."""
    os.replace(pending, path)
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
