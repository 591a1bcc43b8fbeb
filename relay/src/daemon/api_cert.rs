//! The root API's serving certificate: replaced on an admin's order
//! (`relayctl rotate api-cert`) and on its own when two thirds of its
//! lifetime have passed. The API CA signs it, so every kubeconfig keeps
//! working; connections already open keep the old one, and every
//! handshake from then on gets the new one.

use std::sync::Mutex;
use std::time::Duration;

use relaymesh_apiserver::ServingCert;
use tokio_util::sync::CancellationToken;

use super::{unix_ms, DaemonError};
use crate::pki;
use crate::store::{ApiCertificate, Store};

/// How long the renewal loop sleeps at most before it looks again.
const LOOK_AGAIN: Duration = Duration::from_secs(24 * 60 * 60);

/// The serving certificate the API presents, and where it is kept.
pub(super) struct ApiCert {
    store: Store,
    serving: ServingCert,
    /// One rotation at a time: each reads the stored certificate and
    /// writes its successor.
    rotating: Mutex<()>,
}

impl ApiCert {
    /// Serves `certificate`, kept in `store`.
    pub fn new(store: Store, certificate: &ApiCertificate) -> Result<Self, DaemonError> {
        let serving =
            ServingCert::new(&certificate.chain_der, &certificate.key_der).map_err(|error| {
                DaemonError::Listen {
                    address: "the API".into(),
                    source: std::io::Error::other(error),
                }
            })?;
        Ok(Self {
            store,
            serving,
            rotating: Mutex::new(()),
        })
    }

    /// What the API server presents.
    pub fn serving(&self) -> ServingCert {
        self.serving.clone()
    }

    /// The leaf served now (DER).
    pub fn leaf(&self) -> Vec<u8> {
        self.serving.leaf()
    }

    /// A new key and certificate for the same hosts, stored, then served
    /// from the next handshake on; the new leaf.
    pub fn rotate(&self) -> Result<Vec<u8>, String> {
        let _one = self
            .rotating
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self
            .store
            .api_certificate()
            .map_err(|error| error.to_string())?
            .ok_or("this relay has no API certificate")?;
        let leaf = current
            .chain_der
            .first()
            .ok_or("the stored API certificate is empty")?;
        let next = pki::resign_api_cert(&current.authority, leaf).map_err(|e| e.to_string())?;
        let stored = ApiCertificate {
            chain_der: next.chain_der.clone(),
            key_der: next.key_der.clone(),
            authority: current.authority,
        };
        // Stored first: a restart serves what the API already served.
        self.store
            .set_api_certificate(&stored)
            .and_then(|()| self.store.flush())
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

    /// Rotates the certificate when two thirds of its lifetime have
    /// passed, until `shutdown`.
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
}
