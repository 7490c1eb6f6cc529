"""The master key, AES-256-GCM sealing of secrets at rest (wallet keys, CDP credentials), and keys
derived from it for one purpose each (CSRF tokens, refresh-token successors).

The key is `pwmk_` + base64url of 32 random bytes: a format that never looks like a wallet key,
so the "private-key-looking value" guard on configuration cannot confuse the two.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MASTER_KEY_PREFIX = "pwmk_"
_NONCE_BYTES = 12
_SEAL_VERSION = b"\x01"


class MasterKeyError(ValueError):
    pass


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

    def encode(self) -> str:
        return MASTER_KEY_PREFIX + base64.urlsafe_b64encode(self._raw).decode().rstrip("=")

    def derive(self, label: str) -> bytes:
        """A 32-byte key of its own for one purpose (HKDF-SHA256), so no purpose ever uses the
        master key itself and every process that holds the master key derives the same one."""
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label.encode()).derive(self._raw)

    def seal(self, plaintext: bytes, *, context: str) -> bytes:
        """Encrypt `plaintext`, bound to `context` (e.g. the wallet id) as associated data."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return _SEAL_VERSION + nonce + self._aead.encrypt(nonce, plaintext, context.encode())

    def open(self, sealed: bytes, *, context: str) -> bytes:
        if len(sealed) < 1 + _NONCE_BYTES + 16 or sealed[:1] != _SEAL_VERSION:
            raise SealError("not a sealed value")
        nonce = sealed[1 : 1 + _NONCE_BYTES]
        try:
            return self._aead.decrypt(nonce, sealed[1 + _NONCE_BYTES :], context.encode())
        except InvalidTag as exc:
            raise SealError("the sealed value does not open with this master key") from exc


def load_or_create_master_key_file(path: Path) -> MasterKey:
    """Read the key file, creating it 0600 on first run. A file others can read is refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise MasterKeyError(
                f"{path} is readable by other users (mode {mode:o}); run: chmod 600 {path}"
            ) from None
        return MasterKey.parse(path.read_text())
    key = MasterKey.generate()
    with os.fdopen(fd, "w") as handle:
        handle.write(key.encode() + "\n")
    return key
