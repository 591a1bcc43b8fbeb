//! The reconciler: a kube-rs style controller loop that keeps every
//! placement assigned to this cluster applied, pruned and reported.
//!
//! Inputs: the slice the daemon publishes (a `watch` channel of
//! [`AgentSlice`](relaymesh_node::daemon::AgentSlice)), bundles in the
//! node's sled [`Store`](relaymesh_node::store::Store), and events from the
//! watchers on applied kinds ([`crate::drift`]). Output: the cluster's
//! objects, the local [`Inventory`](crate::inventory::Inventory), and
//! per-placement status on the daemon's channel.
//!
//! [`Reconciler::reconcile`] handles one placement and returns an
//! [`Action`]: requeue after a backoff (something failed), or await a change
//! (a new slice, a stored bundle, drift, a status change). Everything it
//! needs is local, so it keeps working with the uplink down and after a
//! restart. It never prunes a whole placement on an untrusted slice: until
//! the daemon has synchronized with its parent once (`parent_position` is
//! set), a placement missing from the slice is kept.
//!
//! What it may write is its [`Policy`](crate::policy::Policy)'s decision
//! (see [`crate::policy`]): a refused object is reported as a failure of its
//! placement and the rest of the bundle is applied.
//!
//! This file is the loop alone. Its parts, in the order a change flows
//! through them: `reconciler/state.rs` (what the reconciler holds, per
//! placement too), `reconciler/slice.rs` (taking a slice in),
//! `reconciler/room.rs` (capacity), `reconciler/pass.rs` (the apply pass of
//! one placement, with `read.rs` and `admit.rs`), `reconciler/removal.rs`
//! (what left), `reconciler/events.rs` (drift), `reconciler/report.rs` and
//! `reconciler/rollout.rs` (status), `reconciler/reachability.rs` (an API
//! that does not answer), and `reconciler/schedule.rs` (when to pass again).

mod admit;
mod error;
mod events;
mod pass;
mod reachability;
mod read;
mod removal;
mod report;
mod rollout;
mod room;
mod schedule;
mod slice;
mod state;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use error::ReconcileError;
pub use schedule::{backoff, Action, DRIFT_SPACING, MAX_BACKOFF, MIN_BACKOFF};
pub use state::Reconciler;

impl Reconciler {
    /// Runs until `shutdown` is cancelled or the slice's sender is gone. The
    /// first slice handled is the first one published after the reconciler
    /// was built (the channel's initial value says nothing).
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), ReconcileError> {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            changed = self.slice.changed() => if changed.is_err() { return Ok(()) },
        }
        self.sync_slice().await?;
        let mut reachability = reachability::probe(self.applier.client().clone(), shutdown.clone());
        loop {
            self.reconcile_due().await?;
            self.report_due().await;
            let next = self
                .placements
                .values()
                .flat_map(|p| [p.due, p.report_at])
                .flatten()
                .min();
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                changed = self.slice.changed() => match changed {
                    Ok(()) => self.sync_slice().await?,
                    Err(_) => return Ok(()),
                },
                Some(event) = self.events.recv() => self.handle_event(event).await,
                Ok(()) = reachability.changed() => {
                    let unreachable = reachability.borrow_and_update().clone();
                    self.set_unreachable(unreachable).await;
                }
                () = sleep_until(next) => {}
            }
        }
    }

    /// Reconciles the placements that are due, in key order.
    async fn reconcile_due(&mut self) -> Result<(), ReconcileError> {
        if self.unreachable.is_some() {
            self.hold_due().await;
            return Ok(());
        }
        let now = Instant::now();
        let mut due: Vec<String> = self
            .placements
            .iter()
            .filter(|(_, placement)| placement.due.is_some_and(|due| due <= now))
            .map(|(key, _)| key.clone())
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        if self.max_replicas.is_some() {
            // Those the cluster runs first: what they ask for now is what
            // the others' room is counted against.
            let running = self.inventory.placements()?;
            due.sort_by_key(|key| !running.contains_key(key));
        }
        for key in due {
            let span = tracing::info_span!("placement", key = %key);
            let action = self.reconcile(&key).instrument(span).await?;
            if let Some(placement) = self.placements.get_mut(&key) {
                placement.last_pass = Some(Instant::now());
                placement.due = match action {
                    Action::Requeue(after) => Some(Instant::now() + after),
                    Action::AwaitChange => None,
                };
            }
        }
        self.update_room()
    }

    /// Reports the placements whose rollout times ran out.
    async fn report_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .placements
            .iter()
            .filter(|(_, placement)| placement.report_at.is_some_and(|at| at <= now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in due {
            if let Some(placement) = self.placements.get_mut(&key) {
                placement.report_at = None;
            }
            self.report(&key).await;
        }
    }

    /// Reconciles placement `key`: applies its bundles, prunes what left
    /// them, and reports its status.
    pub async fn reconcile(&mut self, key: &str) -> Result<Action, ReconcileError> {
        let action = pass::run(self, key).await?;
        self.report(key).await;
        Ok(action)
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
