"""The network engine: nodes over authenticated links, wire format, PKI, sealing, launcher.

Links are mutually authenticated TLS 1.3, or in-memory queues for tests.

Names are imported on first use (a worker process imports only what it runs).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.engine.network.deploy import (
        Faults as Faults,
        NetworkEngine as NetworkEngine,
        write_deployment as write_deployment,
    )
    from dpcomm.engine.network.frames import (
        FRAME_ERROR_REASONS as FRAME_ERROR_REASONS,
        FRAME_VERSION as FRAME_VERSION,
        HEADER_SIZE as HEADER_SIZE,
        MAGIC as MAGIC,
        MAX_FRAME_SIZE as MAX_FRAME_SIZE,
        MESSAGE_ID_SIZE as MESSAGE_ID_SIZE,
        DropCounters as DropCounters,
        Frame as Frame,
        FrameError as FrameError,
        FrameKind as FrameKind,
        ReplayCache as ReplayCache,
        ReplayVerdict as ReplayVerdict,
        StreamClosedError as StreamClosedError,
        decode_frame as decode_frame,
        encode_frame as encode_frame,
        frame_size_for as frame_size_for,
        new_message_id as new_message_id,
        read_frame as read_frame,
    )
    from dpcomm.engine.network.names import NodeName as NodeName
    from dpcomm.engine.network.pki import (
        CA_CERT_FILE as CA_CERT_FILE,
        CA_KEY_FILE as CA_KEY_FILE,
        CertificateAuthority as CertificateAuthority,
        NodeCredentials as NodeCredentials,
        PeerIdentityError as PeerIdentityError,
        PkiError as PkiError,
        certificate_safe as certificate_safe,
        issue_many as issue_many,
        peer_identity as peer_identity,
        validate_node_name as validate_node_name,
    )
    from dpcomm.engine.network.sealing import (
        PAYLOAD_HEADER_SIZE as PAYLOAD_HEADER_SIZE,
        SEAL_OVERHEAD as SEAL_OVERHEAD,
        PayloadKind as PayloadKind,
        SealError as SealError,
        TargetKeys as TargetKeys,
        make_dummy as make_dummy,
        max_content_size as max_content_size,
        open_payload as open_payload,
        payload_size_for as payload_size_for,
        seal_payload as seal_payload,
        sealed_size as sealed_size,
    )
    from dpcomm.engine.network.tls import (
        ConnectionHandler as ConnectionHandler,
        TlsTransport as TlsTransport,
        client_context as client_context,
        open_tls_connection as open_tls_connection,
        server_context as server_context,
        start_tls_server as start_tls_server,
        writer_peer_identity as writer_peer_identity,
    )
    from dpcomm.engine.network.transport import (
        HandshakeError as HandshakeError,
        Link as Link,
        MemoryTransport as MemoryTransport,
        Transport as Transport,
    )

__getattr__, __dir__ = attach(__name__, __file__)
