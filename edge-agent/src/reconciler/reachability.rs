//! Whether the cluster's API answers: a probe task asks `/version` every
//! few seconds and publishes why it cannot be reached (or `None`). While it
//! cannot, the reconciler applies nothing and every placement reports the
//! cluster as failed with reason `ClusterUnreachable` instead of its last
//! known state, which would otherwise stay on the root (ready, or pending
//! for ever) as if nothing were wrong; and the node labels its own record
//! `relaymesh.dev/unreachable`, so the root's `Cluster` says so too.

use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::state::Reconciler;

/// The reason placements and the cluster's record carry while its API does
/// not answer.
pub const UNREACHABLE_REASON: &str = "ClusterUnreachable";

/// How often the API is asked.
const PROBE_INTERVAL: Duration = Duration::from_secs(3);
/// How long one probe may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How many probes in a row must fail before the cluster counts as
/// unreachable: one lost request is not an outage.
const FAILURES_TO_UNREACHABLE: u32 = 2;

/// Starts probing the API `client` reaches until `shutdown`; the receiver
/// holds why it cannot be reached, `None` while it answers (and before the
/// first failures).
pub fn probe(client: Client, shutdown: CancellationToken) -> watch::Receiver<Option<String>> {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                outcome = tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()) => outcome,
            };
            let error = match outcome {
                Ok(Ok(_)) => None,
                Ok(Err(error)) => Some(error.to_string()),
                Err(_) => Some(format!(
                    "the API did not answer within {}s",
                    PROBE_TIMEOUT.as_secs()
                )),
            };
            failures = if error.is_some() { failures + 1 } else { 0 };
            let state = error
                .filter(|_| failures >= FAILURES_TO_UNREACHABLE)
                .map(|error| unreachable_message(&error));
            sender.send_if_modified(|current| {
                // The first failure keeps the state as it was.
                if failures > 0 && state.is_none() {
                    return false;
                }
                let changed = current.is_some() != state.is_some();
                if changed {
                    match &state {
                        Some(message) => {
                            tracing::warn!(%message, "the cluster's API does not answer")
                        }
                        None => tracing::info!("the cluster's API answers again"),
                    }
                }
                *current = state;
                changed
            });
            if sender.is_closed() {
                return;
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(PROBE_INTERVAL) => {}
            }
        }
    });
    receiver
}

/// What a placement's status says while the API does not answer, `error`
/// being the probe's last failure.
pub fn unreachable_message(error: &str) -> String {
    format!("{UNREACHABLE_REASON}: the cluster's API does not answer: {error}")
}

impl Reconciler {
    /// Takes the probe's newest finding: once the API stops answering,
    /// every placement reports `ClusterUnreachable`; once it answers again,
    /// every placement gets a pass (what happened meanwhile is unknown).
    pub(super) async fn set_unreachable(&mut self, unreachable: Option<String>) {
        if self.unreachable == unreachable {
            return;
        }
        self.unreachable = unreachable;
        if let Some(flag) = &self.unreachable_flag {
            let now = self.unreachable.is_some();
            flag.send_if_modified(|said| std::mem::replace(said, now) != now);
        }
        let keys: Vec<String> = self.placements.keys().cloned().collect();
        match self.unreachable.clone() {
            Some(message) => {
                for placement in self.placements.values_mut() {
                    placement.problem = Some(message.clone());
                    placement.due = None;
                }
                for key in keys {
                    self.report(&key).await;
                }
            }
            None => {
                for placement in self.placements.values_mut() {
                    // The pass sets it again if it still holds.
                    placement.problem = None;
                    placement.failures = 0;
                    placement.due = Some(Instant::now());
                }
            }
        }
    }

    /// While the API does not answer, a placement that becomes due (a new
    /// one, a new revision) is reported unreachable instead of applied; it
    /// gets its pass once the API answers again.
    pub(super) async fn hold_due(&mut self) {
        let Some(message) = self.unreachable.clone() else {
            return;
        };
        let mut held = Vec::new();
        for (key, placement) in &mut self.placements {
            if placement.due.is_some() {
                placement.due = None;
                placement.problem = Some(message.clone());
                held.push(key.clone());
            }
        }
        for key in held {
            self.report(&key).await;
        }
    }
}
