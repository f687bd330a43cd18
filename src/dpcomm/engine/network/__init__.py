"""The network engine: nodes over authenticated links, wire format, PKI, sealing, launcher.

Links are mutually authenticated TLS 1.3, or in-memory queues for tests.

Names are imported on first use (a worker process imports only what it runs).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.engine.network.deploy import (
        Faults as Faults,
    )
    from dpcomm.engine.network.deploy import (
        NetworkEngine as NetworkEngine,
    )
    from dpcomm.engine.network.deploy import (
        write_deployment as write_deployment,
    )
    from dpcomm.engine.network.frames import (
        FRAME_ERROR_REASONS as FRAME_ERROR_REASONS,
    )
    from dpcomm.engine.network.frames import (
        FRAME_VERSION as FRAME_VERSION,
    )
    from dpcomm.engine.network.frames import (
        HEADER_SIZE as HEADER_SIZE,
    )
    from dpcomm.engine.network.frames import (
        MAGIC as MAGIC,
    )
    from dpcomm.engine.network.frames import (
        MAX_FRAME_SIZE as MAX_FRAME_SIZE,
    )
    from dpcomm.engine.network.frames import (
        MESSAGE_ID_SIZE as MESSAGE_ID_SIZE,
    )
    from dpcomm.engine.network.frames import (
        DropCounters as DropCounters,
    )
    from dpcomm.engine.network.frames import (
        Frame as Frame,
    )
    from dpcomm.engine.network.frames import (
        FrameError as FrameError,
    )
    from dpcomm.engine.network.frames import (
        FrameKind as FrameKind,
    )
    from dpcomm.engine.network.frames import (
        ReplayCache as ReplayCache,
    )
    from dpcomm.engine.network.frames import (
        ReplayVerdict as ReplayVerdict,
    )
    from dpcomm.engine.network.frames import (
        StreamClosedError as StreamClosedError,
    )
    from dpcomm.engine.network.frames import (
        decode_frame as decode_frame,
    )
    from dpcomm.engine.network.frames import (
        encode_frame as encode_frame,
    )
    from dpcomm.engine.network.frames import (
        frame_size_for as frame_size_for,
    )
    from dpcomm.engine.network.frames import (
        new_message_id as new_message_id,
    )
    from dpcomm.engine.network.frames import (
        read_frame as read_frame,
    )
    from dpcomm.engine.network.names import (
        NodeName as NodeName,
    )
    from dpcomm.engine.network.pki import (
        CA_CERT_FILE as CA_CERT_FILE,
    )
    from dpcomm.engine.network.pki import (
        CA_KEY_FILE as CA_KEY_FILE,
    )
    from dpcomm.engine.network.pki import (
        CertificateAuthority as CertificateAuthority,
    )
    from dpcomm.engine.network.pki import (
        NodeCredentials as NodeCredentials,
    )
    from dpcomm.engine.network.pki import (
        PeerIdentityError as PeerIdentityError,
    )
    from dpcomm.engine.network.pki import (
        PkiError as PkiError,
    )
    from dpcomm.engine.network.pki import (
        certificate_safe as certificate_safe,
    )
    from dpcomm.engine.network.pki import (
        issue_many as issue_many,
    )
    from dpcomm.engine.network.pki import (
        peer_identity as peer_identity,
    )
    from dpcomm.engine.network.pki import (
        validate_node_name as validate_node_name,
    )
    from dpcomm.engine.network.sealing import (
        PAYLOAD_HEADER_SIZE as PAYLOAD_HEADER_SIZE,
    )
    from dpcomm.engine.network.sealing import (
        SEAL_OVERHEAD as SEAL_OVERHEAD,
    )
    from dpcomm.engine.network.sealing import (
        PayloadKind as PayloadKind,
    )
    from dpcomm.engine.network.sealing import (
        SealError as SealError,
    )
    from dpcomm.engine.network.sealing import (
        TargetKeys as TargetKeys,
    )
    from dpcomm.engine.network.sealing import (
        make_dummy as make_dummy,
    )
    from dpcomm.engine.network.sealing import (
        max_content_size as max_content_size,
    )
    from dpcomm.engine.network.sealing import (
        open_payload as open_payload,
    )
    from dpcomm.engine.network.sealing import (
        payload_size_for as payload_size_for,
    )
    from dpcomm.engine.network.sealing import (
        seal_payload as seal_payload,
    )
    from dpcomm.engine.network.sealing import (
        sealed_size as sealed_size,
    )
    from dpcomm.engine.network.tls import (
        ConnectionHandler as ConnectionHandler,
    )
    from dpcomm.engine.network.tls import (
        TlsTransport as TlsTransport,
    )
    from dpcomm.engine.network.tls import (
        client_context as client_context,
    )
    from dpcomm.engine.network.tls import (
        open_tls_connection as open_tls_connection,
    )
    from dpcomm.engine.network.tls import (
        server_context as server_context,
    )
    from dpcomm.engine.network.tls import (
        start_tls_server as start_tls_server,
    )
    from dpcomm.engine.network.tls import (
        writer_peer_identity as writer_peer_identity,
    )
    from dpcomm.engine.network.transport import (
        HandshakeError as HandshakeError,
    )
    from dpcomm.engine.network.transport import (
        Link as Link,
    )
    from dpcomm.engine.network.transport import (
        MemoryTransport as MemoryTransport,
    )
    from dpcomm.engine.network.transport import (
        Transport as Transport,
    )

__getattr__, __dir__ = attach(__name__, __file__)
