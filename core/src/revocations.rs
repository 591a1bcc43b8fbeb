//! Revocations arriving in the slice (see [`relaymesh_protocol::revocation`]).
//!
//! The core knows children only by name, so it does what names allow: it
//! closes the link of a revoked child and forgets the revoked node and its
//! subtree, whose removal goes up like any inventory change. Checking
//! certificates, which carry the time they were issued, is the daemon's: it
//! gets [`Action::Revoked`] and keeps the deny list its listener consults.

use relaymesh_protocol::{ErrorCode, Refusal, Revocation};

use super::slice::Changed;
use super::{Action, Core, Now};

impl Core {
    /// Acts on every revocation among `changed` that is now in the slice.
    pub(super) fn apply_revocations(&mut self, now: Now, changed: &[Changed]) {
        let arrived: Vec<Revocation> = changed
            .iter()
            .filter_map(|change| self.slice.entry(&change.key))
            .filter_map(|entry| match Revocation::from_entry(entry)? {
                Ok(revocation) => Some(revocation),
                Err(error) => {
                    // Signed by the root yet unreadable: a newer root's
                    // format, most likely. Nothing to enforce.
                    tracing::error!(key = %entry.key, %error, "unreadable revocation");
                    None
                }
            })
            .collect();
        for revocation in arrived {
            if let Revocation::Node { name, .. } = &revocation {
                self.drop_child(now, name, revoked(name));
            }
            self.actions.push_back(Action::Revoked(revocation));
        }
    }

    /// Closes a node's link with `refusal`, if it is a child, and forgets
    /// it, everything below it and their status (it was revoked, or it
    /// moved).
    pub(super) fn drop_child(&mut self, now: Now, name: &str, refusal: Refusal) {
        if let Some(link) = self.links_by_name.remove(name) {
            self.relink_child_status(name);
            self.children.remove(&link);
            tracing::warn!(child = name, link, %refusal, "closing a child's link");
            self.actions.push_back(Action::CloseChild { link, refusal });
        }
        self.forget_child_status(now, name);
        let mut mutations = Vec::new();
        let forgotten = self.inventory.remove_subtree(name, &mut mutations);
        self.persist(mutations);
        self.snapshot_admitted_claims();
        if !forgotten.is_empty() {
            tracing::info!(node = name, ?forgotten, "forgot a node's subtree");
            if self.inventory.take_aggregates_changed() {
                self.schedule_recut(now);
            }
            self.schedule_inventory_flush(now);
        }
    }
}

/// The refusal a revoked node gets.
pub(crate) fn revoked(name: &str) -> Refusal {
    Refusal::new(
        ErrorCode::Revoked,
        format!("node {name:?} was revoked by the root; it needs a new join token"),
    )
}
