//! The TLS session of each link a relay accepts, which lets go of rustls's
//! connection once the handshake is over.
//!
//! quinn's own session (`quinn::crypto::rustls::TlsSession`) keeps the
//! whole `rustls::quic::Connection` for the link's life: its handshake
//! buffers, its key schedule and the TLS record layer's keys, which QUIC
//! never uses (its packet keys protect every packet). A relay holds one per
//! child, about 3.4 KB of heap each (docs/performance.md, "The heap of a
//! link"). After the handshake a server's session only still answers for:
//!
//! - the next 1-RTT keys of a key update, from rustls's `quic::Secrets`;
//! - the peer's certificate chain and the handshake data (ALPN, SNI).
//!
//! So once the handshake is complete and its last bytes (the session
//! tickets) are written, the connection is dropped and those are kept.
//! What a server gives up:
//!
//! - keying-material export (relaymesh does not use it);
//! - post-handshake TLS messages from a client: QUIC defines none a client
//!   may send (rustls refused them before); such bytes now end the link
//!   as a protocol violation.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::BytesMut;

use quinn::crypto::rustls::{HandshakeData, QuicServerConfig};
use quinn::crypto::{self, ExportKeyingMaterialError, KeyPair, Keys, UnsupportedVersion};
use quinn::ConnectionId;
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{Side, TransportError, TransportErrorCode};
use rustls::pki_types::CertificateDer;
use rustls::quic::{KeyChange, PacketKey, Secrets, ServerConnection, Suite, Version};
use rustls::CipherSuite;

use super::PkiError;

/// A relay listener's QUIC crypto configuration: quinn's for the initial
/// keys and retry tags, [`Session`] for the handshake and after.
pub(super) struct ServerConfig {
    quinn: QuicServerConfig,
    tls: Arc<rustls::ServerConfig>,
    initial: Suite,
    issuers: Arc<Issuers>,
}

impl ServerConfig {
    pub(super) fn new(tls: Arc<rustls::ServerConfig>) -> Result<Self, PkiError> {
        let quinn = QuicServerConfig::try_from(tls.clone())?;
        // The suite quinn found for the initial packets, looked up again
        // because quinn keeps its copy private.
        let initial = tls
            .crypto_provider()
            .cipher_suites
            .iter()
            .filter(|suite| suite.suite() == CipherSuite::TLS13_AES_128_GCM_SHA256)
            .find_map(|suite| suite.tls13()?.quic_suite())
            .ok_or_else(|| {
                rustls::Error::General("no TLS 1.3 AES-128-GCM suite for QUIC".into())
            })?;
        Ok(Self {
            quinn,
            tls,
            initial,
            issuers: Arc::default(),
        })
    }
}

impl crypto::ServerConfig for ServerConfig {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<Keys, UnsupportedVersion> {
        self.quinn.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.quinn.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn crypto::Session> {
        let mut encoded = Vec::new();
        params.write(&mut encoded);
        // quinn asks for a session only after `initial_keys` took the
        // version, so both fail or neither; a session that cannot start
        // ends its link at the first handshake bytes.
        let tls_version = version_of(version);
        let state = match tls_version {
            Some(tls_version) => {
                match ServerConnection::new(self.tls.clone(), tls_version, encoded) {
                    Ok(connection) => State::Handshaking {
                        connection: Box::new(connection),
                        got_handshake_data: false,
                    },
                    Err(error) => State::Failed(format!("TLS session: {error}")),
                }
            }
            None => State::Failed(format!("unsupported QUIC version {version:#x}")),
        };
        Box::new(Session {
            version: tls_version.unwrap_or(Version::V1),
            suite: self.initial,
            next_secrets: None,
            state,
            issuers: self.issuers.clone(),
        })
    }
}

/// A relay's side of one link's TLS.
pub(super) struct Session {
    version: Version,
    suite: Suite,
    /// Where the next key update's keys come from, once 1-RTT keys exist.
    next_secrets: Option<Secrets>,
    state: State,
    issuers: Arc<Issuers>,
}

enum State {
    /// rustls runs the handshake; boxed so that [`State::Done`] is small.
    Handshaking {
        connection: Box<ServerConnection>,
        got_handshake_data: bool,
    },
    /// The handshake is over and every byte of it written.
    Done(Box<Finished>),
    /// The session could not start; the link ends at its first bytes.
    Failed(String),
}

/// What a session keeps of its handshake.
struct Finished {
    alpn: Option<Vec<u8>>,
    server_name: Option<String>,
    /// The peer's leaf and the issuers after it, if it sent a chain.
    peer_chain: Option<(CertificateDer<'static>, Arc<[CertificateDer<'static>]>)>,
}

impl Session {
    /// Drops rustls's connection once the handshake is complete and has
    /// nothing left to write (the session tickets go out with the last
    /// handshake bytes).
    fn finish_if_done(&mut self) {
        let State::Handshaking { connection, .. } = &self.state else {
            return;
        };
        if connection.is_handshaking() || self.next_secrets.is_none() {
            return;
        }
        let server = connection.as_ref();
        let finished = Finished {
            alpn: server.alpn_protocol().map(<[u8]>::to_vec),
            server_name: server.server_name().map(str::to_owned),
            peer_chain: server.peer_certificates().and_then(|chain| {
                let (leaf, issuers) = chain.split_first()?;
                Some((leaf.clone(), self.issuers.intern(issuers)))
            }),
        };
        self.state = State::Done(Box::new(finished));
    }
}

impl crypto::Session for Session {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        let side = match side {
            Side::Client => rustls::Side::Client,
            Side::Server => rustls::Side::Server,
        };
        keys_of(self.suite.keys(dst_cid, side, self.version))
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let (alpn, server_name) = match &self.state {
            State::Handshaking {
                connection,
                got_handshake_data: true,
            } => (
                connection.alpn_protocol().map(<[u8]>::to_vec),
                connection.server_name().map(str::to_owned),
            ),
            State::Done(finished) => (finished.alpn.clone(), finished.server_name.clone()),
            State::Handshaking { .. } | State::Failed(_) => return None,
        };
        Some(Box::new(HandshakeData {
            protocol: alpn,
            server_name,
        }))
    }

    /// The `Any` is a `Vec<CertificateDer<'static>>`, as quinn's own.
    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        let chain: Vec<CertificateDer<'static>> = match &self.state {
            State::Handshaking { connection, .. } => connection
                .peer_certificates()?
                .iter()
                .map(|cert| cert.clone().into_owned())
                .collect(),
            State::Done(finished) => {
                let (leaf, issuers) = finished.peer_chain.as_ref()?;
                std::iter::once(leaf)
                    .chain(issuers.iter())
                    .cloned()
                    .collect()
            }
            State::Failed(_) => return None,
        };
        Some(Box::new(chain))
    }

    /// Never: the listener's TLS configuration accepts no early data.
    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn crypto::PacketKey>)> {
        None
    }

    fn early_data_accepted(&self) -> Option<bool> {
        None
    }

    fn is_handshaking(&self) -> bool {
        match &self.state {
            State::Handshaking { connection, .. } => connection.is_handshaking(),
            State::Done(_) => false,
            State::Failed(_) => true,
        }
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        let (connection, got_handshake_data) = match &mut self.state {
            State::Handshaking {
                connection,
                got_handshake_data,
            } => (connection, got_handshake_data),
            State::Done(_) => {
                return Err(transport_error(
                    TransportErrorCode::PROTOCOL_VIOLATION,
                    "TLS data after the handshake".into(),
                ))
            }
            State::Failed(reason) => {
                return Err(transport_error(
                    TransportErrorCode::INTERNAL_ERROR,
                    reason.clone(),
                ))
            }
        };
        connection
            .read_hs(buf)
            .map_err(|error| match connection.alert() {
                Some(alert) => {
                    transport_error(TransportErrorCode::crypto(alert.into()), error.to_string())
                }
                None => transport_error(
                    TransportErrorCode::PROTOCOL_VIOLATION,
                    format!("TLS error: {error}"),
                ),
            })?;
        if *got_handshake_data {
            return Ok(false);
        }
        // As quinn's session: rustls gives no signal that the ClientHello
        // was read, so the server name or ALPN showing up is taken as one.
        let ready = connection.server_name().is_some()
            || connection.alpn_protocol().is_some()
            || !connection.is_handshaking();
        *got_handshake_data = ready;
        Ok(ready)
    }

    /// A server's session is asked for these during the handshake only.
    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        let State::Handshaking { connection, .. } = &self.state else {
            return Ok(None);
        };
        let Some(mut encoded) = connection.quic_transport_parameters() else {
            return Ok(None);
        };
        TransportParameters::read(Side::Server, &mut encoded)
            .map(Some)
            .map_err(Into::into)
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let State::Handshaking { connection, .. } = &mut self.state else {
            return None;
        };
        let written = buf.len();
        let change = connection.write_hs(buf);
        let keys = match change {
            Some(KeyChange::Handshake { keys }) => keys,
            Some(KeyChange::OneRtt { keys, next }) => {
                self.next_secrets = Some(next);
                keys
            }
            None => {
                // quinn asks again until nothing comes: that call is the
                // end of the handshake's bytes.
                if buf.len() == written {
                    self.finish_if_done();
                }
                return None;
            }
        };
        Some(keys_of(keys))
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn crypto::PacketKey>>> {
        let secrets = self.next_secrets.as_mut()?;
        let these = Arc::new(secrets.clone());
        // Moves the secrets on a generation; the keys made on the way are
        // dropped, and made again from `these` if ever used.
        drop(secrets.next_packet_keys());
        Some(KeyPair {
            local: Box::new(NextKey::new(these.clone(), Half::Local)),
            remote: Box::new(NextKey::new(these, Half::Remote)),
        })
    }

    /// Only a client checks retries.
    fn is_valid_retry(&self, _: &ConnectionId, _: &[u8], _: &[u8]) -> bool {
        false
    }

    /// Never: rustls's QUIC server connection offers no export, and once
    /// the handshake is over nothing of the key schedule is kept for one.
    fn export_keying_material(
        &self,
        _: &mut [u8],
        _: &[u8],
        _: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        Err(ExportKeyingMaterialError)
    }
}

fn transport_error(code: TransportErrorCode, reason: String) -> TransportError {
    TransportError {
        code,
        frame: None,
        reason,
    }
}

/// The issuers' certificates of the links' chains, one copy per distinct
/// list: every child of a relay presents the same issuers after its own
/// leaf (about 1.1 KB of a 1.5 KB chain, two levels below the root).
/// Only chains that passed the handshake's verification get here, so the
/// lists are the mesh's own issuers; the dead ones go at each new insert.
#[derive(Default)]
struct Issuers(Mutex<HashMap<Vec<CertificateDer<'static>>, Weak<[CertificateDer<'static>]>>>);

impl Issuers {
    fn intern(&self, issuers: &[CertificateDer<'static>]) -> Arc<[CertificateDer<'static>]> {
        let Ok(mut known) = self.0.lock() else {
            return issuers.into();
        };
        if let Some(shared) = known.get(issuers).and_then(Weak::upgrade) {
            return shared;
        }
        known.retain(|_, shared| shared.strong_count() > 0);
        let shared: Arc<[CertificateDer<'static>]> = issuers.into();
        known.insert(issuers.to_vec(), Arc::downgrade(&shared));
        shared
    }
}

/// A packet key of a key update, made when first used. quinn asks for the
/// next generation's keys as soon as the handshake ends and keeps them for
/// the link's life, yet it updates keys only after millions of packets, so
/// most links never use them: until then each pair is one copy of the
/// secrets (about 200 bytes) rather than two expanded AES keys.
struct NextKey {
    secrets: Arc<Secrets>,
    half: Half,
    key: OnceLock<Box<dyn PacketKey>>,
}

#[derive(Clone, Copy)]
enum Half {
    Local,
    Remote,
}

impl NextKey {
    fn new(secrets: Arc<Secrets>, half: Half) -> Self {
        Self {
            secrets,
            half,
            key: OnceLock::new(),
        }
    }

    // quinn implements its key trait for the box, not for the key in it.
    #[allow(clippy::borrowed_box)]
    fn key(&self) -> &Box<dyn PacketKey> {
        self.key.get_or_init(|| {
            let keys = Secrets::clone(&self.secrets).next_packet_keys();
            match self.half {
                Half::Local => keys.local,
                Half::Remote => keys.remote,
            }
        })
    }
}

impl crypto::PacketKey for NextKey {
    fn encrypt(&self, packet: u64, buf: &mut [u8], header_len: usize) {
        crypto::PacketKey::encrypt(self.key(), packet, buf, header_len);
    }

    fn decrypt(
        &self,
        packet: u64,
        header: &[u8],
        payload: &mut BytesMut,
    ) -> Result<(), crypto::CryptoError> {
        crypto::PacketKey::decrypt(self.key(), packet, header, payload)
    }

    fn tag_len(&self) -> usize {
        crypto::PacketKey::tag_len(self.key())
    }

    fn confidentiality_limit(&self) -> u64 {
        crypto::PacketKey::confidentiality_limit(self.key())
    }

    fn integrity_limit(&self) -> u64 {
        crypto::PacketKey::integrity_limit(self.key())
    }
}

/// quinn's QUIC versions as rustls names them (quinn's own mapping).
fn version_of(version: u32) -> Option<Version> {
    match version {
        0xff00_001d..=0xff00_0020 => Some(Version::V1Draft),
        0x0000_0001 | 0xff00_0021..=0xff00_0022 => Some(Version::V1),
        _ => None,
    }
}

fn keys_of(keys: rustls::quic::Keys) -> Keys {
    Keys {
        header: KeyPair {
            local: Box::new(keys.local.header),
            remote: Box::new(keys.remote.header),
        },
        packet: KeyPair {
            local: Box::new(keys.local.packet),
            remote: Box::new(keys.remote.packet),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(byte: u8) -> CertificateDer<'static> {
        CertificateDer::from(vec![byte; 300])
    }

    #[test]
    fn children_of_one_issuer_share_one_copy_of_the_issuers() {
        let issuers = Issuers::default();
        let first = issuers.intern(&[cert(1), cert(2)]);
        let second = issuers.intern(&[cert(1), cert(2)]);
        assert!(Arc::ptr_eq(&first, &second));
        let other = issuers.intern(&[cert(3), cert(2)]);
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(&*other, &[cert(3), cert(2)]);

        // Once no link holds a list, the next new one takes its place.
        drop((first, second));
        let _ = issuers.intern(&[cert(4)]);
        let known = issuers.0.lock().expect("lock");
        assert_eq!(known.len(), 2);
        assert!(!known.contains_key(&vec![cert(1), cert(2)]));
    }
}
