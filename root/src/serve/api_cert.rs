//! The root API's TLS material while it runs: its serving certificate,
//! the API CAs that verify clients, and the one that signs new users.
//!
//! - The serving certificate is replaced on an admin's order (`relayctl
//!   rotate api-cert now`) and on its own when two thirds of its lifetime
//!   have passed; the API CA signs it, so kubeconfigs keep working.
//! - The API CA rotates in two steps (`relayctl rotate api-ca
//!   start|finish`): start makes a new CA that signs new users, while
//!   clients of both CAs are accepted and new kubeconfigs trust both; the
//!   serving certificate stays the old CA's, so old kubeconfigs keep
//!   working. Finish serves a certificate of the new CA and accepts its
//!   clients only.
//!
//! Connections already open keep what they had; every request and
//! handshake from then on gets the new material. Everything is stored
//! before it is used, so a restart serves the same.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use relaymesh_apiserver::{Authenticator, ServingCert};
use tokio_util::sync::CancellationToken;

use crate::api::{ApiAuthorities, ApiCaState};
use relaymesh_node::daemon::{unix_ms, DaemonError};
use relaymesh_node::pki::{self, ApiAuthority};
use relaymesh_node::store::ApiCertificate;

use crate::state::RootState;

/// How long the renewal loop sleeps at most before it looks again.
const LOOK_AGAIN: Duration = Duration::from_secs(24 * 60 * 60);

/// The API's TLS material, and where it is kept.
pub(super) struct ApiCert {
    store: Arc<dyn RootState>,
    serving: ServingCert,
    clients: Authenticator,
    authorities: ApiAuthorities,
    /// One change at a time: each reads the stored material and writes
    /// its successor.
    changing: Mutex<()>,
}

impl ApiCert {
    /// Serves `certificate`, kept in `store`, with `previous` the API CA
    /// being retired if a rotation is under way.
    pub fn new(
        store: Arc<dyn RootState>,
        certificate: &ApiCertificate,
        previous: Option<ApiAuthority>,
    ) -> Result<Self, DaemonError> {
        let unusable = |error: relaymesh_apiserver::ApiError| DaemonError::Listen {
            address: "the API".into(),
            source: std::io::Error::other(error),
        };
        let trusted = trusted(&certificate.authority, previous.as_ref());
        Ok(Self {
            store,
            serving: ServingCert::new(&certificate.chain_der, &certificate.key_der)
                .map_err(unusable)?,
            clients: Authenticator::new(&trusted).map_err(unusable)?,
            authorities: ApiAuthorities::new(certificate.authority.clone(), &trusted),
            changing: Mutex::new(()),
        })
    }

    /// What the API server presents.
    pub fn serving(&self) -> ServingCert {
        self.serving.clone()
    }

    /// Who verifies client certificates.
    pub fn clients(&self) -> Authenticator {
        self.clients.clone()
    }

    /// What signs user certificates and what their kubeconfigs trust.
    pub fn authorities(&self) -> ApiAuthorities {
        self.authorities.clone()
    }

    /// The leaf served now (DER).
    pub fn leaf(&self) -> Vec<u8> {
        self.serving.leaf()
    }

    /// Where the API CA stands.
    pub fn ca_state(&self) -> Result<ApiCaState, String> {
        let (current, previous) = self.stored()?;
        Ok(ApiCaState {
            signing: current.authority.cert_der,
            previous: previous.map(|previous| previous.cert_der),
            serving: self.leaf(),
        })
    }

    /// A new key and certificate for the same hosts, signed by the CA that
    /// signs the served one (the old CA during a rotation), stored, then
    /// served from the next handshake on; the new leaf.
    pub fn rotate(&self) -> Result<Vec<u8>, String> {
        let _one = self.lock();
        let (current, previous) = self.stored()?;
        let signer = previous.as_ref().unwrap_or(&current.authority);
        self.serve_new(current.clone(), signer, previous.as_ref())
    }

    /// Starts a rotation of the API CA: a new CA signs new users; clients
    /// of both are accepted and new kubeconfigs trust both.
    pub fn start_ca_rotation(&self) -> Result<ApiCaState, String> {
        {
            let _one = self.lock();
            let (current, previous) = self.stored()?;
            if previous.is_some() {
                return Err("a rotation of the API CA is under way; finish it first".into());
            }
            let next = pki::create_api_authority().map_err(|error| error.to_string())?;
            let old = current.authority.clone();
            let stored = ApiCertificate {
                authority: next.clone(),
                ..current
            };
            self.store
                .set_api_certificates(&stored, Some(&old))
                .map_err(|error| error.to_string())?;
            self.trust(&next, Some(&old))?;
            tracing::warn!(
                new_ca_sha256 = %pki::hex(&pki::sha256(&next.cert_der)),
                "started a rotation of the API CA: it signs new users; clients of both CAs are accepted"
            );
        }
        self.ca_state()
    }

    /// Finishes a rotation of the API CA: the API serves a certificate of
    /// the new CA and accepts its clients only.
    pub fn finish_ca_rotation(&self) -> Result<ApiCaState, String> {
        {
            let _one = self.lock();
            let (current, previous) = self.stored()?;
            if previous.is_none() {
                return Err("no rotation of the API CA is under way; start one first".into());
            }
            let signer = current.authority.clone();
            self.serve_new(current, &signer, None)?;
            self.trust(&signer, None)?;
            tracing::warn!("finished the rotation of the API CA: only the new one is trusted");
        }
        self.ca_state()
    }

    /// Rotates the serving certificate when two thirds of its lifetime
    /// have passed, until `shutdown`.
    pub async fn renew_before_expiry(&self, shutdown: CancellationToken) {
        loop {
            let wait = match pki::validity_unix(&self.leaf()) {
                Ok((since, until)) => {
                    let due = since + (until.saturating_sub(since)) / 3 * 2;
                    Duration::from_secs(due.saturating_sub(unix_ms() / 1000))
                }
                Err(error) => {
                    tracing::error!(%error, "cannot read the API's serving certificate");
                    LOOK_AGAIN
                }
            };
            if wait.is_zero() {
                if let Err(error) = self.rotate() {
                    tracing::error!(%error, "cannot rotate the API's serving certificate");
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(60)) => {}
                    }
                }
                continue;
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait.min(LOOK_AGAIN)) => {}
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.changing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The stored certificate and the CA being retired.
    fn stored(&self) -> Result<(ApiCertificate, Option<ApiAuthority>), String> {
        let current = self
            .store
            .api_certificate()
            .map_err(|error| error.to_string())?
            .ok_or("this relay has no API certificate")?;
        let previous = self
            .store
            .previous_api_ca()
            .map_err(|error| error.to_string())?;
        Ok((current, previous))
    }

    /// Signs a new serving certificate with `signer` for the hosts of
    /// `current`'s, stores it with `previous`, and serves it.
    fn serve_new(
        &self,
        current: ApiCertificate,
        signer: &ApiAuthority,
        previous: Option<&ApiAuthority>,
    ) -> Result<Vec<u8>, String> {
        let leaf = current
            .chain_der
            .first()
            .ok_or("the stored API certificate is empty")?;
        let next = pki::resign_api_cert(signer, leaf).map_err(|e| e.to_string())?;
        let stored = ApiCertificate {
            chain_der: next.chain_der.clone(),
            key_der: next.key_der.clone(),
            authority: current.authority,
        };
        // Stored first: a restart serves what the API already served.
        self.store
            .set_api_certificates(&stored, previous)
            .map_err(|error| error.to_string())?;
        self.serving
            .replace(&next.chain_der, &next.key_der)
            .map_err(|error| error.to_string())?;
        let new_leaf = next.chain_der.into_iter().next().unwrap_or_default();
        let not_after = pki::validity_unix(&new_leaf).map_or(0, |(_, after)| after);
        tracing::warn!(
            sha256 = %pki::hex(&pki::sha256(&new_leaf)),
            not_after_unix = not_after,
            "rotated the API's serving certificate"
        );
        Ok(new_leaf)
    }

    /// Accepts clients of `signing` and `previous`, and has `signing`
    /// sign new users whose kubeconfigs trust both.
    fn trust(&self, signing: &ApiAuthority, previous: Option<&ApiAuthority>) -> Result<(), String> {
        let trusted = trusted(signing, previous);
        self.clients
            .replace(&trusted)
            .map_err(|error| error.to_string())?;
        self.authorities.set(signing.clone(), &trusted);
        Ok(())
    }
}

/// The CA certificates clients may chain to: the signing one, and the one
/// being retired during a rotation.
fn trusted(signing: &ApiAuthority, previous: Option<&ApiAuthority>) -> Vec<Vec<u8>> {
    std::iter::once(signing.cert_der.clone())
        .chain(previous.map(|previous| previous.cert_der.clone()))
        .collect()
}
