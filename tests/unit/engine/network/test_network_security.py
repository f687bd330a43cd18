"""PKI, end-to-end sealing, the fixed-length frame, the replay cache and drop counters."""

import argparse
import asyncio
import datetime as dt
import random
import stat
import struct

import nacl.public
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given, settings, strategies as st

from dpcomm.cli.pki import add_pki_command
from dpcomm.engine.network import (
    FRAME_ERROR_REASONS,
    HEADER_SIZE,
    MAGIC,
    PAYLOAD_HEADER_SIZE,
    SEAL_OVERHEAD,
    CertificateAuthority,
    DropCounters,
    Frame,
    FrameError,
    FrameKind,
    NodeCredentials,
    PkiError,
    ReplayCache,
    SealError,
    StreamClosedError,
    TargetKeys,
    certificate_safe,
    client_context,
    decode_frame,
    encode_frame,
    frame_size_for,
    issue_many,
    make_dummy,
    new_message_id,
    open_payload,
    read_frame,
    seal_payload,
    sealed_size,
    server_context,
)
from dpcomm.errors import DpcommError, InvalidParameterError

# --------------------------------------------------------------------------------------- PKI


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return CertificateAuthority.create(tmp_path_factory.mktemp("ca"))


def test_ca_files_and_permissions(authority):
    assert authority.cert_path.is_file()
    assert stat.S_IMODE(authority.key_path.stat().st_mode) == 0o600
    constraints = authority.certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca and constraints.critical
    assert "private_key" not in repr(authority)
    loaded = CertificateAuthority.load(authority.directory)
    assert loaded.certificate == authority.certificate


def test_ca_refuses_to_overwrite(authority):
    with pytest.raises(PkiError, match="already exists"):
        CertificateAuthority.create(authority.directory)


def test_load_missing_ca(tmp_path):
    with pytest.raises(PkiError):
        CertificateAuthority.load(tmp_path)


@pytest.mark.parametrize(
    ("name", "dns"),
    [
        ("source-17", "source-17"),
        ("scrambler-(A)-3", "scrambler-a-3"),
        ("compute-(A)-5", "compute-a-5"),
        ("result", "result"),
        ("coordinator", "coordinator"),
    ],
)
def test_node_certificate_carries_the_name(authority, tmp_path, name, dns):
    assert certificate_safe(name) == dns
    credentials = authority.issue(name, tmp_path)
    assert credentials.cert_path.name == f"{name}.pem"
    assert stat.S_IMODE(credentials.key_path.stat().st_mode) == 0o600
    assert credentials.ca_path.read_bytes() == authority.cert_path.read_bytes()
    certificate = credentials.certificate()
    assert certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
    san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [dns]
    usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usage) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert isinstance(certificate.public_key(), ed25519.Ed25519PublicKey)
    assert certificate.issuer == authority.certificate.subject
    assert NodeCredentials.load(tmp_path, name) == credentials


@pytest.mark.parametrize("name", ["", "ca", "CA", "a/b", "-x", "x" * 65, "sp ace", "é"])
def test_invalid_node_names(authority, tmp_path, name):
    with pytest.raises(InvalidParameterError, match="node_name"):
        authority.issue(name, tmp_path)


def test_issue_validity(authority, tmp_path):
    now = dt.datetime.now(dt.UTC)
    credentials = authority.issue(
        "source-1", tmp_path, not_before=now - dt.timedelta(days=3), not_after=now
    )
    assert credentials.certificate().not_valid_after_utc == now.replace(microsecond=0)
    with pytest.raises(InvalidParameterError, match="not_after"):
        authority.issue("source-2", tmp_path, not_before=now, not_after=now)
    with pytest.raises(InvalidParameterError, match="valid_days"):
        authority.issue("source-2", tmp_path, valid_days=0)
    with pytest.raises(InvalidParameterError, match="not_before"):
        authority.issue("source-2", tmp_path, not_before=dt.datetime(2020, 1, 1))


def test_credentials_load_missing(tmp_path):
    with pytest.raises(PkiError, match="not found"):
        NodeCredentials.load(tmp_path, "source-1")


def test_issue_many_thousand(authority, tmp_path):
    names = [f"source-{i}" for i in range(1000)]
    issued = issue_many(authority, names, tmp_path)
    assert list(issued) == names
    assert len(list(tmp_path.glob("source-*.pem"))) == 1000
    serials = {issued[n].certificate().serial_number for n in names[:50]}
    assert len(serials) == 50
    with pytest.raises(InvalidParameterError, match="distinct"):
        issue_many(authority, ["a", "a"], tmp_path)


def test_contexts_are_tls13_mutual(authority, tmp_path):
    import ssl

    credentials = authority.issue("result", tmp_path)
    for context in (server_context(credentials), client_context(credentials)):
        assert context.minimum_version == ssl.TLSVersion.TLSv1_3
        assert context.maximum_version == ssl.TLSVersion.TLSv1_3
        assert context.verify_mode == ssl.CERT_REQUIRED
    assert not client_context(credentials).check_hostname
    broken = NodeCredentials(
        name="result",
        cert_path=tmp_path / "nope.pem",
        key_path=tmp_path / "nope.key",
        ca_path=credentials.ca_path,
    )
    with pytest.raises(PkiError):
        server_context(broken)


def cli_parser():
    parser = argparse.ArgumentParser(prog="dpcomm")
    add_pki_command(parser.add_subparsers(dest="command", required=True))
    return parser


def run_cli(argv):
    args = cli_parser().parse_args(argv)
    return args.handler(args)


def test_cli_init_and_issue(tmp_path, capsys):
    assert run_cli(["pki", "init", "--dir", str(tmp_path / "ca")]) == 0
    assert (tmp_path / "ca" / "ca.key").is_file()
    assert "ca.pem" in capsys.readouterr().out
    out = tmp_path / "nodes"
    argv = ["pki", "issue", "--dir", str(tmp_path / "ca"), "--out", str(out), "--days", "30"]
    assert run_cli([*argv, "--name", "scrambler-(A)-3", "--name", "source-1,source-2"]) == 0
    printed = capsys.readouterr().out
    assert "3 certificate(s) issued" in printed
    for name in ("scrambler-(A)-3", "source-1", "source-2"):
        credentials = NodeCredentials.load(out, name)
        certificate = credentials.certificate()
        days = (certificate.not_valid_after_utc - certificate.not_valid_before_utc).days
        assert days == 30
    with pytest.raises(DpcommError, match="already exists"):
        run_cli(["pki", "init", "--dir", str(tmp_path / "ca")])
    with pytest.raises(DpcommError, match="node_name"):
        run_cli(["pki", "issue", "--dir", str(tmp_path / "ca"), "--name", "a/b"])
    with pytest.raises(PkiError):
        run_cli(["pki", "issue", "--dir", str(tmp_path / "nothing"), "--name", "x"])


# ----------------------------------------------------------------------------------- sealing


def test_sealed_blobs_have_one_length():
    keys = TargetKeys.generate()
    payload_size = 64
    blobs = [
        seal_payload(keys.public_key, b"x" * size, payload_size=payload_size)
        for size in (0, 1, 17, 59)
    ]
    blobs += [make_dummy(keys.public_key, payload_size=payload_size) for _ in range(5)]
    assert {len(blob) for blob in blobs} == {payload_size + SEAL_OVERHEAD}
    assert sealed_size(payload_size) == payload_size + 48
    assert len(set(blobs)) == len(blobs)  # fresh ephemeral key each time


def test_open_real_and_dummy():
    keys = TargetKeys.generate()
    for payload in (b"", b"\x00", b"tuple:42", bytes(range(59))):
        sealed = seal_payload(keys.public_key, payload, payload_size=64)
        assert open_payload(keys, sealed, payload_size=64) == payload
        assert open_payload(keys.nacl_private_key(), sealed) == payload
        assert open_payload(keys.private_key, sealed) == payload
    assert open_payload(keys, make_dummy(keys.public_key, payload_size=64)) is None


def test_payload_too_long():
    keys = TargetKeys.generate()
    with pytest.raises(InvalidParameterError, match="payload"):
        seal_payload(keys.public_key, b"x" * 60, payload_size=64)
    with pytest.raises(InvalidParameterError, match="payload_size"):
        seal_payload(keys.public_key, b"", payload_size=PAYLOAD_HEADER_SIZE - 1)


def test_scrambler_cannot_open():
    target, scrambler = TargetKeys.generate(), TargetKeys.generate()
    for sealed in (
        seal_payload(target.public_key, b"secret", payload_size=32),
        make_dummy(target.public_key, payload_size=32),
    ):
        with pytest.raises(SealError):
            open_payload(scrambler, sealed)


def test_garbage_and_tampering():
    keys = TargetKeys.generate()
    sealed = bytearray(seal_payload(keys.public_key, b"secret", payload_size=32))
    sealed[40] ^= 1
    with pytest.raises(SealError):
        open_payload(keys, bytes(sealed))
    for garbage in (b"", b"\x00" * 10, b"\x00" * 80):
        with pytest.raises(SealError):
            open_payload(keys, garbage)
    with pytest.raises(SealError, match="not 80"):
        open_payload(keys, seal_payload(keys.public_key, b"", payload_size=16), payload_size=32)


def test_malformed_plaintext_is_a_seal_error():
    keys = TargetKeys.generate()
    box = nacl.public.SealedBox(nacl.public.PublicKey(keys.public_key))
    bad = [
        struct.pack(">BI", 9, 0) + bytes(11),  # unknown kind
        struct.pack(">BI", 1, 12) + bytes(11),  # length beyond the padding
        struct.pack(">BI", 1, 2) + b"ab" + b"\x01" + bytes(8),  # non-zero padding
    ]
    for plaintext in bad:
        with pytest.raises(SealError):
            open_payload(keys, box.encrypt(plaintext))


def test_target_keys_repr_hides_the_private_key():
    keys = TargetKeys.generate()
    assert keys.private_key.hex() not in repr(keys)


# ------------------------------------------------------------------------------------ frames

FRAME_SIZE = frame_size_for(64)


def test_frame_round_trip_and_fixed_length():
    assert HEADER_SIZE == 32 and FRAME_SIZE == 96
    frames = [
        Frame.new(kind, round_id=round_id, body=body)
        for kind in FrameKind
        for round_id in (0, 7, 2**64 - 1)
        for body in (b"", b"\x00\x00", b"payload", b"\xff" * 64)
    ]
    encoded = [encode_frame(frame, frame_size=FRAME_SIZE) for frame in frames]
    assert {len(data) for data in encoded} == {FRAME_SIZE}
    assert [decode_frame(data, frame_size=FRAME_SIZE) for data in encoded] == frames


def test_frame_validation():
    with pytest.raises(InvalidParameterError, match=r"frame\.body"):
        encode_frame(Frame.new(FrameKind.DATA, round_id=0, body=b"x" * 65), frame_size=FRAME_SIZE)
    with pytest.raises(InvalidParameterError, match="message_id"):
        Frame(kind=FrameKind.DATA, round_id=0, message_id=b"short")
    with pytest.raises(InvalidParameterError, match="round_id"):
        Frame(kind=FrameKind.DATA, round_id=-1, message_id=new_message_id())
    with pytest.raises(InvalidParameterError, match="kind"):
        Frame(kind=99, round_id=0, message_id=new_message_id())
    assert Frame(kind=2, round_id=0, message_id=bytes(16)).kind is FrameKind.DATA
    with pytest.raises(InvalidParameterError, match="frame_size"):
        decode_frame(b"", frame_size=HEADER_SIZE - 1)
    with pytest.raises(InvalidParameterError, match="reason"):
        FrameError("mystery")


def valid_frame_bytes(body=b"abc", round_id=3):
    return encode_frame(
        Frame.new(FrameKind.DATA, round_id=round_id, body=body), frame_size=FRAME_SIZE
    )


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d[:-1], "truncated"),
        (lambda d: b"", "truncated"),
        (lambda d: d + b"\x00", "oversized"),
        (lambda d: b"XX" + d[2:], "magic"),
        (lambda d: d[:2] + b"\x02" + d[3:], "version"),
        (lambda d: d[:3] + b"\x00" + d[4:], "kind"),
        (lambda d: d[:28] + struct.pack(">I", 65) + d[32:], "length"),
        (lambda d: d[:-1] + b"\x01", "padding"),
    ],
)
def test_each_malformation_has_its_reason(mutate, reason):
    with pytest.raises(FrameError) as caught:
        decode_frame(mutate(valid_frame_bytes()), frame_size=FRAME_SIZE)
    assert caught.value.reason == reason
    counters = DropCounters()
    counters.count_error(caught.value)
    assert counters.as_dict() == {reason: 1}


_INVALID_KINDS = sorted(set(range(256)) - {int(kind) for kind in FrameKind})
_CAPACITY = FRAME_SIZE - HEADER_SIZE


def _bytes(rng: random.Random, low: int, high: int) -> bytes:
    return rng.randbytes(rng.randint(low, high))


def malformed_frame(rng: random.Random) -> tuple[bytes, str]:
    """A byte string that is certainly not a valid frame, and the reason expected."""
    choice = rng.randint(0, 7)
    body = _bytes(rng, 0, _CAPACITY - 1)
    valid = encode_frame(
        Frame(
            kind=rng.choice(list(FrameKind)),
            round_id=rng.randint(0, 2**64 - 1),
            message_id=rng.randbytes(16),
            body=body,
        ),
        frame_size=FRAME_SIZE,
    )
    if choice == 0:  # random bytes of any wrong length
        length = rng.choice(
            [rng.randint(0, FRAME_SIZE - 1), rng.randint(FRAME_SIZE + 1, 2 * FRAME_SIZE)]
        )
        data = rng.randbytes(length)
        return data, "truncated" if len(data) < FRAME_SIZE else "oversized"
    if choice == 1:  # random bytes of the right length (magic forced wrong)
        data = rng.randbytes(FRAME_SIZE)
        if data[:2] == MAGIC:
            data = b"\x00" + data[1:]
        return data, "magic"
    if choice == 2:  # truncation of a valid frame
        return valid[: rng.randint(0, FRAME_SIZE - 1)], "truncated"
    if choice == 3:  # a valid frame with trailing bytes
        return valid + _bytes(rng, 1, FRAME_SIZE), "oversized"
    if choice == 4:  # a bit flip in the magic or version byte
        bit = rng.randint(0, 23)
        flipped = bytearray(valid)
        flipped[bit // 8] ^= 1 << (bit % 8)
        return bytes(flipped), "magic" if bit < 16 else "version"
    if choice == 5:  # an unknown kind
        return valid[:3] + bytes([rng.choice(_INVALID_KINDS)]) + valid[4:], "kind"
    if choice == 6:  # a body length beyond the frame
        length = rng.randint(_CAPACITY + 1, 2**32 - 1)
        return valid[:28] + struct.pack(">I", length) + valid[32:], "length"
    start = HEADER_SIZE + len(body)  # a bit flip in the padding
    position = rng.randint(start, FRAME_SIZE - 1)
    flipped = bytearray(valid)
    flipped[position] ^= 1 << rng.randint(0, 7)
    return bytes(flipped), "padding"


def _dropped_with_its_reason(data: bytes, reason: str, counters: DropCounters) -> None:
    try:
        decode_frame(data, frame_size=FRAME_SIZE)
    except FrameError as error:
        counters.count_error(error)
        assert error.reason == reason
    else:
        pytest.fail(f"accepted a malformed frame: {data!r}")


def test_ten_thousand_malformed_frames_are_dropped_and_counted():
    """10,000 malformed frames from a seeded generator (every kind of malformation)."""
    counters = DropCounters()
    rng = random.Random(20261126)
    for _ in range(10_000):
        _dropped_with_its_reason(*malformed_frame(rng), counters)
    assert counters.total == 10_000
    assert set(counters.as_dict()) == set(FRAME_ERROR_REASONS)


@settings(max_examples=300, deadline=None, database=None)
@given(st.randoms(use_true_random=False))
def test_a_malformed_frame_is_dropped_with_its_reason(rng):
    _dropped_with_its_reason(*malformed_frame(rng), DropCounters())


@settings(max_examples=1_000, deadline=None, database=None)
@given(st.binary(min_size=FRAME_SIZE, max_size=FRAME_SIZE), st.data())
def test_any_mutation_decodes_or_raises_frame_error(noise, data):
    base = valid_frame_bytes(body=data.draw(st.binary(max_size=_CAPACITY)))
    positions = data.draw(st.lists(st.integers(0, FRAME_SIZE - 1), max_size=4))
    mutated = bytearray(base)
    for position in positions:
        mutated[position] = noise[position]
    try:
        frame = decode_frame(bytes(mutated), frame_size=FRAME_SIZE)
    except FrameError as error:
        assert error.reason in FRAME_ERROR_REASONS
    else:
        assert encode_frame(frame, frame_size=FRAME_SIZE) == bytes(mutated)


def test_read_frame_from_a_stream():
    async def scenario():
        frame = valid_frame_bytes()
        reader = asyncio.StreamReader()
        reader.feed_data(frame + frame[:10])
        reader.feed_eof()
        assert await read_frame(reader, frame_size=FRAME_SIZE) == frame
        with pytest.raises(FrameError) as caught:
            await read_frame(reader, frame_size=FRAME_SIZE)
        assert caught.value.reason == "truncated"
        closed = asyncio.StreamReader()
        closed.feed_eof()
        with pytest.raises(StreamClosedError):
            await read_frame(closed, frame_size=FRAME_SIZE)

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ replay cache


def test_replay_cache_rejects_repeats_and_old_rounds():
    cache = ReplayCache(window=2)
    first, second = new_message_id(), new_message_id()
    assert cache.admit(5, first) == "fresh"
    assert cache.admit(5, first) == "replay"
    assert cache.admit(5, second) == "fresh"
    assert cache.admit(6, first) == "fresh"  # another round: another message
    cache.advance(6)
    assert cache.admit(5, first) == "replay"  # round 5 is still in the window of 2
    cache.advance(7)
    assert cache.oldest_round == 6
    assert cache.admit(5, new_message_id()) == "stale"
    assert cache.admit(6, first) == "replay"
    cache.advance(3)  # never backwards
    assert cache.current_round == 7
    assert len(cache) == 1


def test_replay_cache_capacity_never_accepts_a_replay():
    cache = ReplayCache(capacity=3)
    ids = [new_message_id() for _ in range(5)]
    assert all(cache.admit(1, i) == "fresh" for i in ids[:3])
    assert cache.admit(1, ids[3]) == "overflow"
    assert cache.admit(2, ids[3]) == "fresh"  # round 1 is forgotten and becomes stale
    assert cache.admit(1, ids[0]) == "stale"
    assert cache.admit(2, ids[3]) == "replay"
    with pytest.raises(InvalidParameterError, match="capacity"):
        ReplayCache(capacity=0)


def test_drop_counters():
    counters = DropCounters()
    counters.add("replay")
    counters.add("replay", 2)
    counters.add("handshake")
    assert counters["replay"] == 3 and counters["absent"] == 0
    assert counters.total == 4
    assert counters.as_dict() == {"handshake": 1, "replay": 3}
    with pytest.raises(InvalidParameterError):
        counters.add("Not A Reason")
