"""A local certificate authority and per-node certificates (Ed25519, ``cryptography``).

Section 2.3 of the paper assumes node identifiers cannot be forged, "typically achieved through
the use of a public key infrastructure". This module is that PKI for a deployment: one local CA
(``ca.pem``, ``ca.key``) signs one certificate per node. A node's name (``source-17``,
``scrambler-(A)-3``, ``result``, ...) is the certificate subject's common name, which
`peer_identity` reads back from an authenticated TLS connection; a DNS subject
alternative name derived from it (`certificate_safe`) is added for tools that expect one.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import ssl
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dpcomm.errors import DpcommError, InvalidParameterError

CA_CERT_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
MAX_NODE_NAME_LENGTH = 64
"""X.509's upper bound on a common name (ub-common-name)."""

_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._()#@+-]*")
_RESERVED_NAMES = frozenset({"ca"})
_CLOCK_SKEW = dt.timedelta(minutes=5)
_ORGANIZATION = "dpcomm"
MAX_VALID_DAYS = 36_500
"""Longest validity accepted (100 years; X.509 dates end in 9999)."""


class PkiError(DpcommError):
    """A certificate or key is missing, unreadable or would be overwritten."""


class PeerIdentityError(DpcommError):
    """A TLS peer has no authenticated certificate carrying a node name."""


def validate_node_name(name: str) -> str:
    """Return ``name`` if it can name a node (certificate CN and file stem), else raise.

    Allowed: 1 to 64 characters among letters, digits and ``. _ ( ) # @ + -``, starting with a
    letter or digit; ``ca`` is reserved for the authority's own files.
    """
    if (
        not isinstance(name, str)
        or len(name) > MAX_NODE_NAME_LENGTH
        or _NODE_NAME.fullmatch(name) is None
        or name.lower() in _RESERVED_NAMES
    ):
        raise InvalidParameterError(
            "node_name",
            "1-64 characters among letters, digits and ._()#@+- starting with a letter or digit, "
            "not 'ca'",
            name,
        )
    return name


def certificate_safe(name: str) -> str:
    """A DNS label derived from a node name: lower case, runs of other characters become ``-``.

    ``scrambler-(A)-3`` becomes ``scrambler-a-3``. It is not injective; the node's identity is
    the certificate's common name, which keeps the exact name.
    """
    label = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return label[:63].rstrip("-") or "node"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write_file(path: Path, data: bytes, *, mode: int, overwrite: bool) -> None:
    """Write ``data`` to a new file ``path`` with ``mode``; never through a symbolic link.

    Without ``overwrite`` an existing ``path`` (even a dangling link) is refused. With it the
    data goes to a new file in the same folder that then replaces ``path`` atomically: a link
    at ``path`` is replaced, not followed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    target = path
    if overwrite:
        target = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        descriptor = os.open(target, flags, mode)
    except FileExistsError:
        raise PkiError(f"{path} already exists (not overwritten; force=True replaces it)") from None
    except OSError as error:
        raise PkiError(f"cannot write {path}: {error.strerror}") from error
    try:
        os.fchmod(descriptor, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
    except OSError as error:
        os.close(descriptor)
        target.unlink(missing_ok=True)
        raise PkiError(f"cannot write {path}: {error.strerror}") from error
    os.close(descriptor)
    if overwrite:
        os.replace(target, path)


def _write_private(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Write a private key readable by the owner only (0600); see `_write_file`."""
    _write_file(path, data, mode=0o600, overwrite=overwrite)


def _write_public(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Write a certificate (0644); see `_write_file`."""
    _write_file(path, data, mode=0o644, overwrite=overwrite)


def _key_pem(key: ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _validity(
    *,
    valid_days: int,
    not_before: dt.datetime | None,
    not_after: dt.datetime | None,
) -> tuple[dt.datetime, dt.datetime]:
    if (
        isinstance(valid_days, bool)
        or not isinstance(valid_days, int)
        or not 1 <= valid_days <= MAX_VALID_DAYS
    ):
        raise InvalidParameterError(
            "valid_days", f"an integer in [1, {MAX_VALID_DAYS}] (days)", valid_days
        )
    for label, moment in (("not_before", not_before), ("not_after", not_after)):
        if moment is not None and (not isinstance(moment, dt.datetime) or moment.tzinfo is None):
            raise InvalidParameterError(label, "a timezone-aware datetime or None", moment)
    start = not_before if not_before is not None else _now() - _CLOCK_SKEW
    end = not_after if not_after is not None else start + dt.timedelta(days=valid_days)
    if end <= start:
        raise InvalidParameterError("not_after", f"a time after not_before ({start})", end)
    return start, end


@dataclass(frozen=True, kw_only=True)
class NodeCredentials:
    """Where a node's certificate, private key and the trusted CA certificate are stored."""

    name: str
    cert_path: Path
    key_path: Path
    ca_path: Path

    def __post_init__(self) -> None:
        validate_node_name(self.name)
        for label in ("cert_path", "key_path", "ca_path"):
            object.__setattr__(self, label, Path(getattr(self, label)))

    @classmethod
    def load(cls, directory: str | os.PathLike[str], name: str) -> NodeCredentials:
        """Node ``name``'s credentials in ``directory``: ``<name>.pem``, ``.key``, ``ca.pem``."""
        validate_node_name(name)
        folder = Path(directory)
        credentials = cls(
            name=name,
            cert_path=folder / f"{name}.pem",
            key_path=folder / f"{name}.key",
            ca_path=folder / CA_CERT_FILE,
        )
        missing = [
            str(path)
            for path in (credentials.cert_path, credentials.key_path, credentials.ca_path)
            if not path.is_file()
        ]
        if missing:
            raise PkiError(f"credentials of node {name!r} not found: {', '.join(missing)}")
        return credentials

    def certificate(self) -> x509.Certificate:
        """The node's certificate, parsed."""
        return _read_certificate(self.cert_path)


def _read_certificate(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as error:
        raise PkiError(f"cannot read certificate {path}: {error}") from error


def _subject(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public: ed25519.Ed25519PublicKey,
    start: dt.datetime,
    end: dt.datetime,
    *,
    certificate_authority: bool,
) -> x509.CertificateBuilder:
    """A certificate of ``subject`` with the constraints and key usage of a CA or of a node."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.BasicConstraints(
                ca=certificate_authority, path_length=0 if certificate_authority else None
            ),
            critical=True,
        )
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=certificate_authority,
                crl_sign=certificate_authority,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


@dataclass(frozen=True, kw_only=True)
class CertificateAuthority:
    """A local certificate authority: its directory, certificate and (unprinted) private key."""

    directory: Path
    certificate: x509.Certificate
    private_key: ed25519.Ed25519PrivateKey = field(repr=False)

    @property
    def cert_path(self) -> Path:
        """Path of the CA certificate (``ca.pem``)."""
        return self.directory / CA_CERT_FILE

    @property
    def key_path(self) -> Path:
        """Path of the CA private key (``ca.key``, mode 0600)."""
        return self.directory / CA_KEY_FILE

    @classmethod
    def create(
        cls,
        directory: str | os.PathLike[str],
        *,
        name: str = "dpcomm local CA",
        valid_days: int = 3650,
        overwrite: bool = False,
    ) -> CertificateAuthority:
        """Create a CA in ``directory`` (``ca.pem``, ``ca.key`` 0600); never overwrite silently."""
        if not isinstance(name, str) or not name or len(name) > MAX_NODE_NAME_LENGTH:
            raise InvalidParameterError("name", "a non-empty string of at most 64 characters", name)
        start, end = _validity(valid_days=valid_days, not_before=None, not_after=None)
        folder = Path(directory)
        if not overwrite and ((folder / CA_KEY_FILE).exists() or (folder / CA_CERT_FILE).exists()):
            raise PkiError(f"a certificate authority already exists in {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        key = ed25519.Ed25519PrivateKey.generate()
        subject = _subject(name)
        public = key.public_key()
        certificate = (
            _builder(subject, subject, public, start, end, certificate_authority=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False
            )
            .sign(key, None)
        )
        _write_private(folder / CA_KEY_FILE, _key_pem(key), overwrite=overwrite)
        _write_public(
            folder / CA_CERT_FILE,
            certificate.public_bytes(serialization.Encoding.PEM),
            overwrite=overwrite,
        )
        return cls(directory=folder, certificate=certificate, private_key=key)

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> CertificateAuthority:
        """Load the CA stored in ``directory`` by `create`."""
        folder = Path(directory)
        certificate = _read_certificate(folder / CA_CERT_FILE)
        try:
            key = serialization.load_pem_private_key((folder / CA_KEY_FILE).read_bytes(), None)
        except (OSError, ValueError, TypeError) as error:
            raise PkiError(f"cannot read CA key {folder / CA_KEY_FILE}: {error}") from error
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise PkiError(f"CA key {folder / CA_KEY_FILE} is not an Ed25519 key")
        public = certificate.public_key()
        if not isinstance(public, ed25519.Ed25519PublicKey) or (
            key.public_key().public_bytes_raw() != public.public_bytes_raw()
        ):
            raise PkiError(f"CA key and certificate in {folder} do not match")
        return cls(directory=folder, certificate=certificate, private_key=key)

    def issue(
        self,
        node_name: str,
        out_dir: str | os.PathLike[str],
        *,
        valid_days: int = 365,
        not_before: dt.datetime | None = None,
        not_after: dt.datetime | None = None,
        overwrite: bool = False,
    ) -> NodeCredentials:
        """Issue a certificate for ``node_name`` into ``out_dir``.

        Writes ``<name>.pem``, ``<name>.key`` (0600) and a copy of the CA certificate
        (``ca.pem``). Existing files are refused (`PkiError`) unless ``overwrite``;
        files are never written through a symbolic link.
        The certificate is valid from ``not_before`` (default: now - 5 min) to ``not_after``
        (default: ``valid_days`` later) for both TLS server and client authentication.
        """
        validate_node_name(node_name)
        start, end = _validity(valid_days=valid_days, not_before=not_before, not_after=not_after)
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        self._check_free([node_name], folder, overwrite=overwrite)
        self._copy_ca(folder, overwrite=overwrite)
        return self._issue_one(node_name, folder, start, end, overwrite=overwrite)

    def _check_free(self, names: Iterable[str], folder: Path, *, overwrite: bool) -> None:
        """Refuse, before writing anything, node files that exist (unless ``overwrite``)."""
        if overwrite:
            return
        for name in names:
            for path in (folder / f"{name}.key", folder / f"{name}.pem"):
                if path.exists() or path.is_symlink():
                    raise PkiError(
                        f"{path} already exists (not overwritten; force=True replaces it)"
                    )

    def _copy_ca(self, folder: Path, *, overwrite: bool) -> None:
        """The CA certificate as ``folder/ca.pem``: kept if it is already this CA's."""
        target = folder / CA_CERT_FILE
        data = self.certificate.public_bytes(serialization.Encoding.PEM)
        if not target.is_symlink() and target.is_file() and target.read_bytes() == data:
            return
        _write_public(target, data, overwrite=overwrite)

    def _issue_one(
        self,
        node_name: str,
        folder: Path,
        start: dt.datetime,
        end: dt.datetime,
        *,
        overwrite: bool,
    ) -> NodeCredentials:
        key = ed25519.Ed25519PrivateKey.generate()
        public = key.public_key()
        certificate = (
            _builder(
                _subject(node_name),
                self.certificate.subject,
                public,
                start,
                end,
                certificate_authority=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(certificate_safe(node_name))]),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.private_key.public_key()),
                critical=False,
            )
            .sign(self.private_key, None)
        )
        cert_path = folder / f"{node_name}.pem"
        key_path = folder / f"{node_name}.key"
        _write_private(key_path, _key_pem(key), overwrite=overwrite)
        _write_public(
            cert_path, certificate.public_bytes(serialization.Encoding.PEM), overwrite=overwrite
        )
        return NodeCredentials(
            name=node_name, cert_path=cert_path, key_path=key_path, ca_path=folder / CA_CERT_FILE
        )


def issue_many(
    ca: CertificateAuthority,
    names: Iterable[str],
    out_dir: str | os.PathLike[str],
    *,
    valid_days: int = 365,
    overwrite: bool = False,
) -> dict[str, NodeCredentials]:
    """Issue one certificate per node name into ``out_dir`` (Ed25519: well under 1 ms per node).

    Existing files are refused before anything is written, unless ``overwrite``.
    """
    names = list(names)
    for name in names:
        validate_node_name(name)
    if len(set(names)) != len(names):
        raise InvalidParameterError("names", "distinct node names", names)
    start, end = _validity(valid_days=valid_days, not_before=None, not_after=None)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    ca._check_free(names, folder, overwrite=overwrite)
    ca._copy_ca(folder, overwrite=overwrite)
    return {name: ca._issue_one(name, folder, start, end, overwrite=overwrite) for name in names}


def peer_identity(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str:
    """The node name (certificate common name) of the authenticated peer of a TLS connection.

    Only meaningful on a context with ``verify_mode = CERT_REQUIRED`` (see
    `dpcomm.engine.network.tls`): the handshake has then verified the certificate against
    the project CA. Raises `PeerIdentityError` when there is no verified certificate or
    its common name is not a valid node name.
    """
    if ssl_object is None:
        raise PeerIdentityError("the connection is not a TLS connection")
    certificate = ssl_object.getpeercert()
    if not certificate:
        raise PeerIdentityError("the peer presented no verified certificate")
    names: list[object] = []
    for relative_name in certificate.get("subject", ()):
        for attribute in relative_name:
            if len(attribute) == 2 and attribute[0] == "commonName":
                names.append(attribute[1])
    if len(names) != 1 or not isinstance(names[0], str):
        raise PeerIdentityError(f"the peer certificate has {len(names)} common names, not 1")
    try:
        return validate_node_name(names[0])
    except InvalidParameterError as error:
        raise PeerIdentityError(f"the peer certificate names no node: {names[0]!r}") from error
