"""Sealed evaluations: organisms that the public package and the public seed
do not give away.

Unsealed, an organism is a pure function of ``(seed, tier, n_genes)``: anyone
with the package regenerates it, which is what makes the paper's figures
reproducible, and what lets an agent that can run code read the answers. A
:class:`Seal` folds a secret into every organism key: the organism of public
seed ``s`` is generated from the *sealed seed* ``HMAC-SHA256(secret, s)``
(63 bits), so its network, malfunction, tasks, invented names and measurement
noise all follow from the secret; without it, neither the seed nor the names
lead back to the organism. The same secret gives the same organisms, so a
sealed sweep resumes and reproduces.

Only the seal's :attr:`~Seal.fingerprint` (a hash that does not reveal the
secret) is ever written to results; the sealed seed itself is never shown to
an agent. Where the secret comes from: ``LUCA_GYM_SECRET``, a file, or drawn
once and kept beside the results (:func:`load_or_create`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

import numpy as np

SECRET_ENV = "LUCA_GYM_SECRET"
SECRET_FILE = "secret.key"  # the drawn secret, beside the results it seals
MIN_SECRET = 16  # characters: a short secret could be guessed
_SEED_BITS = 63  # sealed seeds are valid seeds: [0, 2**63)


@dataclass(frozen=True)
class Seal:
    """A secret folded into every organism key. ``repr`` shows the fingerprint
    only, so a seal can be logged; compare seals by fingerprint."""

    secret: bytes

    def __post_init__(self):
        if not isinstance(self.secret, bytes):
            raise TypeError(f"secret: expected bytes, got {type(self.secret).__name__}")
        if len(self.secret) < MIN_SECRET:
            raise ValueError(f"secret: {len(self.secret)} characters; a sealed evaluation needs at least {MIN_SECRET}")

    def __repr__(self) -> str:
        return f"Seal(fingerprint={self.fingerprint!r})"

    @property
    def fingerprint(self) -> str:
        """16 hex digits identifying the secret (results record this, never the secret)."""
        return hashlib.sha256(b"luca-gym seal fingerprint\0" + self.secret).hexdigest()[:16]

    def _mac(self, purpose: bytes, data: bytes) -> bytes:
        return hmac.new(self.secret, purpose + b"\0" + data, hashlib.sha256).digest()

    def organism_seed(self, seed: int) -> int:
        """The seed the organism of public ``seed`` is generated from."""
        digest = self._mac(b"organism", int(seed).to_bytes(8, "big"))
        return int.from_bytes(digest[:8], "big") >> (64 - _SEED_BITS)

    def draw(self, purpose: str) -> int:
        """A 64-bit value of the secret for ``purpose`` (a world's host-side
        draw that must follow the secret, e.g. the order of a sealed panel)."""
        return int.from_bytes(self._mac(b"draw", purpose.encode()), "big") >> 192

    def organism_seeds(self, seeds) -> np.ndarray:
        """:meth:`organism_seed` of many public seeds: int64 array."""
        return np.asarray([self.organism_seed(int(s)) for s in np.asarray(seeds).reshape(-1)], np.int64)

    def instance_id(self, seed: int, prefix: str = "org") -> str:
        """An opaque id for public ``seed``: stable under this secret, unrelated to the seed without it.
        ``prefix`` names the kind of instance (LUCA's organisms: ``org``)."""
        purpose = b"organism id" if prefix == "org" else f"{prefix} id".encode()
        return f"{prefix}_" + self._mac(purpose, int(seed).to_bytes(8, "big")).hex()[:12]

    def organism_id(self, seed: int) -> str:
        """LUCA's :meth:`instance_id`."""
        return self.instance_id(seed)

    def sign(self, data: bytes) -> str:
        """An HMAC of ``data`` under the secret (results lines carry one, so an edited line is refused)."""
        return self._mac(b"record", data).hex()


def instance_id(seed: int, seal: Seal | None, prefix: str = "org") -> str:
    """The id a session shows for public ``seed``: ``org_00000007`` unsealed,
    an opaque :meth:`Seal.instance_id` sealed. The one formula for every front end."""
    return f"{prefix}_{int(seed):08d}" if seal is None else seal.instance_id(seed, prefix)


def make_seal(sealed) -> Seal | None:
    """The seal an API's ``sealed=`` option names: None or False (unsealed, the
    default), a :class:`Seal`, a secret (str or bytes), or True (the secret in
    ``LUCA_GYM_SECRET``). ValueError names what is wrong and what is allowed."""
    if sealed is None or sealed is False:
        return None
    if isinstance(sealed, Seal):
        return sealed
    if sealed is True:
        return from_env()
    if isinstance(sealed, str):
        if not sealed.strip():
            raise ValueError("sealed: an empty secret; give at least 16 characters")
        sealed = sealed.strip().encode("utf-8", errors="surrogatepass")
    if isinstance(sealed, bytes):
        try:
            return Seal(sealed)
        except ValueError as exc:
            raise ValueError(f"sealed: {exc}") from None
    raise ValueError(f"sealed: {type(sealed).__name__} not allowed; allowed None, True ({SECRET_ENV}), a secret string or a Seal")


def from_env() -> Seal:
    """The seal of ``$LUCA_GYM_SECRET``; ValueError if it is unset or too short."""
    value = os.environ.get(SECRET_ENV)
    if not value:
        raise ValueError(f"sealed: {SECRET_ENV} is not set; set it to a secret of at least {MIN_SECRET} characters, or give a secret file")
    try:
        return Seal(value.strip().encode("utf-8", errors="surrogatepass"))
    except ValueError as exc:
        raise ValueError(f"{SECRET_ENV}: {exc}") from None


def read_secret_file(path: str) -> Seal:
    """The seal of the secret stored in ``path`` (surrounding whitespace ignored)."""
    try:
        with open(path, "rb") as f:
            data = f.read().strip()
    except OSError as exc:
        raise ValueError(f"secret file {path}: cannot be read ({exc.strerror})") from None
    try:
        return Seal(data)
    except ValueError as exc:
        raise ValueError(f"secret file {path}: {exc}") from None


def load_or_create(folder: str) -> tuple[Seal, bool]:
    """The seal kept in ``folder/secret.key``, drawn (256 random bits, the file
    readable by its owner only) if there is none yet. Returns (seal, created)."""
    path = os.path.join(folder, SECRET_FILE)
    if os.path.exists(path):
        return read_secret_file(path), False
    os.makedirs(folder, exist_ok=True)
    secret = secrets.token_hex(32).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(secret + b"\n")
    return Seal(secret), True


def resolve_seeds(seeds, seal: Seal | None) -> np.ndarray:
    """The seeds organisms are generated from: ``seeds`` unsealed, their sealed seeds under ``seal``."""
    seeds = np.asarray(seeds, np.int64)
    return seeds if seal is None else seal.organism_seeds(seeds).reshape(seeds.shape)
