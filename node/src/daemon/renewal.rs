//! Renewing this node's TLS certificate while it runs (see
//! [`crate::pki`]'s renewal): when the core's schedule says
//! ([`relaymesh_core::renewal`]), the root signs its own again and every
//! other node asks its parent over the current link. This module does the
//! asking and the installing, and tells the schedule what it did. The new certificate is stored, used for every later
//! connection to the parent and, at a relay, served to its children; links
//! already open stay as they are.
//!
//! A node whose certificate expired while it was offline asks on the first
//! connection it makes, before anything else: its parent renews it within
//! its grace period (see [`pki::standing`]) and the node dials again with
//! the new one; past the grace period, or revoked, it is refused, and says
//! so.

use std::time::Duration;

use relaymesh_protocol::message::{Open, RenewReply, RenewRequest};
use relaymesh_protocol::Refusal;
use tokio::sync::{mpsc, watch};

use relaymesh_core::renewal::Renewal as Schedule;
use relaymesh_core::Now;

use super::{unix_ms, DaemonError, Event};
use crate::identity::{Identity, LiveIdentity};
use crate::pki;
use crate::store::Store;
use crate::transport::{expect_frame, write_frame, LinkError};

/// The renewal state the loop keeps.
pub(super) struct Renewal {
    identity: Identity,
    /// The identity the daemon's tasks read, replaced with `identity`.
    live: LiveIdentity,
    validity: Duration,
    client: watch::Sender<quinn::ClientConfig>,
    server: Option<quinn::Endpoint>,
    /// The node's candidate parents, which its client configuration
    /// accepts as servers (see [`pki::quic_client_config_among`]).
    candidates: Vec<relaymesh_protocol::CandidateParent>,
    /// The issuer key (its SubjectPublicKeyInfo's hash, as the root
    /// recorded it) that must sign the next renewal: set after the node
    /// re-parented, whose new parent signs with another issuer.
    rehome: Option<[u8; 32]>,
    /// `rehome` is the root's new mesh CA key (a rotation), not a new
    /// parent's issuer.
    resigning: bool,
    /// A relay's issuer certificate or the chain above it changed since
    /// the last [`Renewal::take_issuer_changed`].
    issuer_changed: bool,
    /// The connection (quinn's `stable_id`) made with an expired
    /// certificate, on which a renewal is asked before anything else.
    expired_on: Option<usize>,
    /// A relay's new issuer key, asked to be signed with the next renewal
    /// (see `pki::issuer_rotation`), and the mesh CA key the root signed
    /// with when the rotation began.
    rotating: Option<(pki::NewIssuerKey, [u8; 32])>,
    /// A relay's last renewal came from another key than the one that
    /// signed its issuer (its parent's key rotated after the link was
    /// made): ask again at once, with its issuer.
    reissue: bool,
    /// How long the links to children may stay silent.
    idle: Duration,
}

/// What a parent answered to a renewal asked on the connection
/// `connection` (quinn's `stable_id`).
#[derive(Debug)]
pub(crate) struct Answer {
    connection: usize,
    /// The chain the parent served on that connection, leaf first.
    server_chain: Vec<Vec<u8>>,
    result: Result<Renewed, Failure>,
}

/// Why a renewal did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// The parent refused it, saying why.
    #[error("the parent refused: {0}")]
    Refused(Refusal),
    /// The exchange failed (link down, no answer, a bad answer).
    #[error("{0}")]
    Failed(String),
}

/// What the loop does after the answer to a renewal asked on a connection
/// made with an expired certificate: that connection serves nothing else.
#[derive(Debug)]
pub(super) enum AfterExpired {
    /// Renewed (or the exchange failed): drop the connection and dial
    /// again, with the renewed certificate if there is one.
    Redial,
    /// The parent refused: tell the uplink, which drops the connection
    /// and waits as after any refusal.
    Refused {
        /// The connection it concerns.
        connection: usize,
        /// What the parent said.
        refusal: Refusal,
    },
}

impl Renewal {
    /// Starts with `live`'s certificate, scheduled in `when`; `client` is
    /// the uplink's configuration and `server` the listener's endpoint,
    /// both replaced on each renewal.
    pub fn new(
        live: LiveIdentity,
        validity: Duration,
        client: watch::Sender<quinn::ClientConfig>,
        server: Option<quinn::Endpoint>,
        candidates: Vec<relaymesh_protocol::CandidateParent>,
        when: &mut Schedule,
        now: Now,
    ) -> Self {
        let identity = Identity::clone(&live.get());
        when.installed(now, pki::expiry(&identity).unwrap_or_default());
        when.server_signed(now);
        Self {
            identity,
            live,
            validity,
            client,
            server,
            candidates,
            rehome: None,
            resigning: false,
            issuer_changed: false,
            expired_on: None,
            rotating: None,
            reissue: false,
            idle: pki::IDLE_TIMEOUT,
        }
    }

    /// Serves children with links that end after `idle` without a word
    /// (see [`pki::quic_server_config_idle`]).
    pub fn with_link_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// The candidate parents the client configuration accepts, from the
    /// next identity on.
    pub fn set_candidates(&mut self, candidates: Vec<relaymesh_protocol::CandidateParent>) {
        self.candidates = candidates;
    }

    /// The node re-parented to `parent`: its certificate is renewed by it
    /// now, through `parent`'s issuer, so that it no longer rests on the
    /// old parent's.
    pub fn rehome(
        &mut self,
        parent: &relaymesh_protocol::CandidateParent,
        when: &mut Schedule,
        now: Now,
    ) {
        self.rehome = Some(parent.issuer_key);
        self.resigning = false;
        when.due_now(now);
    }

    /// A mesh CA key other than `signer_key`, which signs under the mesh
    /// now, signed this node's certificate (a rotation of the mesh CA):
    /// the parent (the root) signs it again now, and a relay's issuer too.
    pub fn resign(&mut self, signer_key: [u8; 32], when: &mut Schedule, now: Now) {
        tracing::info!("the root signs with a new mesh CA: renewing this node's certificate now");
        self.rehome = Some(signer_key);
        self.resigning = true;
        when.renew_now(now);
    }

    /// The root rotates its mesh CA (signing with `during_ca` now): this
    /// relay makes a new issuer key and has its parent sign it now.
    pub fn rotate_issuer(&mut self, during_ca: [u8; 32], when: &mut Schedule, now: Now) {
        if self.rotating.is_some() {
            return;
        }
        match pki::new_issuer_request(&self.identity) {
            Ok(Some(request)) => {
                tracing::info!("the mesh CA rotates: this relay makes a new issuer key and has its parent sign it");
                self.rotating = Some((request, during_ca));
                when.renew_now(now);
            }
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "cannot make a new issuer key"),
        }
    }

    /// The rotation of the mesh CA finished: this relay no longer serves
    /// the children its previous issuer key signed (they renewed through
    /// the new one), and forgets that key.
    pub async fn drop_previous_issuer(
        &mut self,
        store: &Store,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        tracing::info!("the mesh CA rotation finished: this relay drops its previous issuer key");
        let identity = pki::without_previous_issuer(&self.identity);
        self.install(store, identity, when, now).await
    }

    /// Stores and uses `identity`, which trusts other mesh CAs than the
    /// current one, from the next connection on (links already open stay
    /// as they are).
    pub async fn trust(
        &mut self,
        store: &Store,
        identity: Identity,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        self.install(store, identity, when, now).await
    }

    /// The identity this node uses now.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Whether this relay's issuer was signed again or the chain above it
    /// changed since the last call (and resets it): its children renew
    /// then, so that their chains lead through the new one.
    pub fn take_issuer_changed(&mut self) -> bool {
        std::mem::take(&mut self.issuer_changed)
    }

    /// Whether this node's certificate has expired (the root renews its own
    /// without a link, so never needs to ask).
    pub fn expired(&self) -> bool {
        self.identity.token_signing_key.is_none()
            && pki::expiry(&self.identity).is_ok_and(|not_after| unix_ms() / 1000 > not_after)
    }

    /// The uplink connected with an expired certificate: asks the parent to
    /// renew it on `connection` now, and nothing else is done on it (the
    /// parent would refuse it).
    pub async fn renew_expired(
        &mut self,
        store: &Store,
        connection: quinn::Connection,
        events: &mpsc::Sender<Event>,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        let expired_for = pki::expiry(&self.identity)
            .map_or(0, |not_after| (unix_ms() / 1000).saturating_sub(not_after));
        tracing::warn!(
            expired_for = %humantime::format_duration(Duration::from_secs(expired_for)),
            "this node's certificate has expired; asking the parent to renew it (it does within its grace period, unless this node was revoked)"
        );
        self.expired_on = Some(connection.stable_id());
        self.due(store, Some(connection), events, false, when, now)
            .await
    }

    /// Renews now (the core said so): at the root by itself; elsewhere by
    /// asking the parent on `parent`, whose answer comes back as
    /// [`Event::Renewed`]. `refresh_server`: a relay signs itself a new
    /// server certificate (valid for [`pki::SERVER_CERT_VALIDITY`]) even
    /// when it cannot renew its own, so its children keep their parent
    /// through a long outage above it.
    pub async fn due(
        &mut self,
        store: &Store,
        parent: Option<quinn::Connection>,
        events: &mpsc::Sender<Event>,
        refresh_server: bool,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        if refresh_server {
            self.serve_with(&self.identity.clone(), when, now)?;
        }
        match pki::renew_at_root(&self.identity, self.validity) {
            Ok(Some(renewed)) => return self.adopt(store, renewed, when, now).await,
            Ok(None) => {}
            Err(error) => {
                tracing::error!(%error, "cannot renew the root's certificate");
                when.retry(now, false);
                return Ok(());
            }
        }
        let Some(connection) = parent else {
            // Asked again once the parent is back (or in a minute).
            when.retry(now, false);
            return Ok(());
        };
        // A new issuer key is signed by the parent; after re-parenting,
        // or when the parent signs with another key than the one that
        // signed it, a relay has its issuer signed again too.
        let server_chain = pki::connection_chain(&connection).unwrap_or_default();
        let issuer_csr = match (&self.rotating, &self.rehome) {
            (Some((request, _)), _) => Ok(Some(request.csr_der.clone())),
            (None, Some(_)) => pki::issuer_renewal_request(&self.identity),
            (None, None) if self.reissue || pki::parent_rekeyed(&self.identity, &server_chain) => {
                pki::issuer_renewal_request(&self.identity)
            }
            (None, None) => Ok(None),
        };
        let request = match pki::renewal_request(&self.identity).and_then(|tls_csr| {
            Ok(RenewRequest {
                tls_csr_der: tls_csr,
                issuer_csr_der: issuer_csr?,
            })
        }) {
            Ok(request) => request,
            Err(error) => {
                tracing::error!(%error, "cannot make a renewal request");
                when.retry(now, false);
                return Ok(());
            }
        };
        when.asked();
        let events = events.clone();
        tokio::spawn(async move {
            let answer = Answer {
                connection: connection.stable_id(),
                server_chain,
                result: ask(&connection, request).await,
            };
            let _ = events.send(Event::Renewed(answer)).await;
        });
        Ok(())
    }

    /// The parent answered; what to do with the connection it was asked
    /// on, if that was made with an expired certificate.
    pub async fn answered(
        &mut self,
        store: &Store,
        answer: Answer,
        when: &mut Schedule,
        now: Now,
    ) -> Result<Option<AfterExpired>, DaemonError> {
        when.answered();
        let on_expired = self
            .expired_on
            .take_if(|connection| *connection == answer.connection)
            .is_some();
        let mut served = answer.server_chain;
        let reissue = &mut self.reissue;
        let renewed = answer.result.and_then(|(chain, issuer_chain, successor)| {
            // The link may predate the parent's new key: the answer brings
            // the certificate in which the old key vouches for it.
            served.extend(successor);
            let served = &served;
            // That key signs this relay's issuer too, which was not asked
            // for: ask again, with it.
            *reissue = false;
            if issuer_chain.is_none() && pki::parent_rekeyed(&self.identity, &chain) {
                *reissue = true;
                return Err(Failure::Failed(
                    "the parent signs with a new key: asking again with this relay's issuer".into(),
                ));
            }
            match (&self.rotating, &self.rehome, issuer_chain) {
                (Some((request, during_ca)), _, issuer_chain) => pki::rotated_identity(
                    &self.identity,
                    chain,
                    issuer_chain,
                    request.key_der.clone(),
                    *during_ca,
                    served,
                ),
                (None, Some(key), issuer_chain) => {
                    pki::rehomed_identity(&self.identity, chain, issuer_chain, key)
                }
                (None, None, Some(issuer_chain)) => {
                    pki::resigned_identity(&self.identity, chain, issuer_chain, served)
                }
                (None, None, None) => pki::renewed_through(&self.identity, chain, served),
            }
            .map_err(|error| Failure::Failed(error.to_string()))
        });
        match renewed {
            Ok(identity) => {
                if self.rotating.take().is_some() {
                    tracing::info!("signs its children with its new issuer key; serves those of the old one until the rotation finishes");
                    // Signed through the root's new CA as well.
                    self.rehome = None;
                    self.resigning = false;
                }
                if self.rehome.take().is_some() {
                    if std::mem::take(&mut self.resigning) {
                        tracing::info!("uses the certificate the root signed with its new mesh CA");
                    } else {
                        tracing::info!("uses the certificate its new parent signed");
                    }
                }
                self.adopt(store, identity, when, now).await?;
                Ok(on_expired.then_some(AfterExpired::Redial))
            }
            Err(Failure::Refused(refusal)) if on_expired => {
                tracing::error!(%refusal, "the parent refused to renew this node's expired certificate");
                when.retry(now, false);
                Ok(Some(AfterExpired::Refused {
                    connection: answer.connection,
                    refusal,
                }))
            }
            Err(error) => {
                // Asked again while this one was on its way (the root's
                // trust arrived), or with this relay's issuer: that one
                // goes now, not after the pause.
                if self.reissue {
                    tracing::info!(%error, "renewing again");
                } else {
                    tracing::warn!(%error, "certificate renewal failed; retrying");
                }
                when.retry(now, self.reissue);
                Ok(on_expired.then_some(AfterExpired::Redial))
            }
        }
    }

    /// Stores and uses the identity a move's join gave this node, from the
    /// next connection on.
    pub async fn replace(
        &mut self,
        store: &Store,
        identity: Identity,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        self.install(store, identity, when, now).await?;
        tracing::info!("uses the certificate its new parent signed");
        Ok(())
    }

    /// Stores and uses a renewed identity.
    async fn adopt(
        &mut self,
        store: &Store,
        identity: Identity,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        self.install(store, identity, when, now).await?;
        let expires = pki::expiry(&self.identity).unwrap_or_default();
        tracing::info!(expires_unix = expires, "renewed this node's certificate");
        Ok(())
    }

    /// Stores `identity` and uses it from the next connection on.
    async fn install(
        &mut self,
        store: &Store,
        identity: Identity,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        store.set_identity_off_runtime(identity.clone()).await?;
        self.serve_with(&identity, when, now)?;
        if identity.token_signing_key.is_none() {
            self.client
                .send_replace(pki::quic_client_config_among(&identity, &self.candidates)?);
        }
        let chain = |identity: &Identity| {
            identity
                .issuer
                .as_ref()
                .map(|issuer| (issuer.cert_der.clone(), issuer.chain_der.clone()))
        };
        self.issuer_changed |= chain(&identity) != chain(&self.identity);
        self.live.set(identity.clone());
        self.identity = identity;
        when.installed(now, pki::expiry(&self.identity).unwrap_or_default());
        Ok(())
    }

    /// Has the listener serve new connections with a server certificate
    /// signed for `identity` now.
    fn serve_with(
        &mut self,
        identity: &Identity,
        when: &mut Schedule,
        now: Now,
    ) -> Result<(), DaemonError> {
        if let Some(server) = &self.server {
            server.set_server_config(Some(pki::quic_server_config_idle(identity, self.idle)?));
            when.server_signed(now);
        }
        Ok(())
    }
}

/// What a parent's renewal gave: the TLS chain, the issuer chain if it
/// was asked for one, and the parent's new issuer certificate its old key
/// signed, while its key rotates.
pub(super) type Renewed = (Vec<Vec<u8>>, Option<Vec<Vec<u8>>>, Option<Vec<u8>>);

/// Sends a renewal request on the parent connection and reads the answer.
async fn ask(connection: &quinn::Connection, request: RenewRequest) -> Result<Renewed, Failure> {
    let exchange = async {
        let (mut send, mut recv) = connection.open_bi().await?;
        write_frame(&mut send, &Open::Renew(request)).await?;
        let _ = send.finish();
        expect_frame::<RenewReply>(&mut recv).await
    };
    match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(Ok(RenewReply::Renewed {
            tls_chain_der,
            issuer_chain_der,
            successor_der,
        })) => Ok((tls_chain_der, issuer_chain_der, successor_der)),
        Ok(Ok(RenewReply::Refused(refusal))) => Err(Failure::Refused(refusal)),
        Ok(Err(LinkError::Refused(refusal))) => Err(Failure::Refused(refusal)),
        Ok(Err(error)) => Err(Failure::Failed(error.to_string())),
        Err(_) => Err(Failure::Failed(
            "the parent did not answer within 30 s".into(),
        )),
    }
}
