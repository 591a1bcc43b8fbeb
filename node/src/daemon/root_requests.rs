//! At the root: what the API and the placement controller ask of the loop,
//! each answered from the core and signed with the root's key. The
//! decisions are the core's (`relaymesh_core`'s `rollouts`,
//! `root_handover`, `drains`, `report`); the loop signs and publishes them.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_core::rollouts::RolloutInput;
use relaymesh_core::{Now, PlacementReport};
use relaymesh_protocol::{BundleId, Move, Revocation, SliceEntry, Target};

use super::root_services::RootRequest;
use super::Daemon;

impl Daemon {
    /// Answers what the root's API or placement controller asked.
    pub(super) async fn handle_root(&mut self, now: Now, request: RootRequest) {
        match request {
            RootRequest::PlacementStatus { gates_open, reply } => {
                let _ = reply.send(self.report_placements(now, &gates_open));
            }
            RootRequest::SetPlacements { entries, reply } => {
                self.set_placements(now, entries);
                let _ = reply.send(());
            }
            RootRequest::Revoke { revocation, reply } => {
                let _ = reply.send(self.publish_revocation(now, &revocation));
            }
            RootRequest::RotateMeshCa { step, reply } => {
                let _ = reply.send(self.rotate_mesh_ca(now, step).await);
            }
            RootRequest::RotateTokenKey { step, reply } => {
                let _ = reply.send(self.rotate_token_key(now, step).await);
            }
            RootRequest::Query { node, query, reply } => {
                let id = self.core.query(now, &node, query);
                self.queries.insert(id, reply);
            }
            RootRequest::OrderMove { moved, reply } => {
                let _ = reply.send(self.order_move(now, moved));
            }
            RootRequest::LabelCluster { change, reply } => {
                let _ = reply.send(self.label_cluster(now, change));
            }
            RootRequest::GrantParents {
                node,
                candidates,
                reply,
            } => {
                let _ = reply.send(self.grant_parents(now, &node, candidates));
            }
            RootRequest::Moves { reply } => {
                let _ = reply.send(self.moves());
            }
            RootRequest::Revocations { reply } => {
                let _ = reply.send(self.revocations());
            }
            RootRequest::PublishBundle { name, id, reply } => {
                self.publish_bundle(now, name, id);
                let _ = reply.send(());
            }
        }
    }

    /// Every placement's report, after publishing the handovers and drains
    /// that are done. One step on purpose: a cluster is marked `Drained` in
    /// the same turn of the loop as the reports that leave it out, so
    /// `relayctl drain --wait` never sees the mark beside a status that
    /// still counts the cluster (tests/tests/drain.rs). The controller asks
    /// at least every 5 s.
    pub(super) fn report_placements(
        &mut self,
        now: Now,
        gates_open: &BTreeMap<String, bool>,
    ) -> BTreeMap<String, PlacementReport> {
        self.publish_finished(now);
        for entry in self.core.advance_rollouts(now, gates_open) {
            if let Some(entry) = self.seal(now, entry) {
                self.core.upsert_local(now, entry);
            }
        }
        self.core
            .placement_reports(relaymesh_protocol::placement::KEY_PREFIX)
    }

    /// Signs and publishes the handovers and drains the core finds done
    /// (the new clusters ready, or the handover timed out).
    fn publish_finished(&mut self, now: Now) {
        for base in self.core.finished_handovers(now) {
            if let Some(entry) = self.seal(now, base) {
                self.core.upsert_local(now, entry);
            }
        }
        for done in self.core.finished_drains(now) {
            let cluster = done.node.clone();
            if let Err(error) = self.label_cluster(now, done.into()) {
                tracing::warn!(%cluster, %error, "cannot mark the drain done");
            }
        }
    }

    /// The placement controller's entries are every placement entry now
    /// (their bundles already stored): the others go, each changed one is
    /// handed over and signed.
    pub(super) fn set_placements(&mut self, now: Now, entries: Vec<(SliceEntry, RolloutInput)>) {
        let wanted: BTreeSet<String> = entries.iter().map(|(entry, _)| entry.key.clone()).collect();
        let stale: Vec<String> = self
            .core
            .entries_with_prefix(relaymesh_protocol::placement::KEY_PREFIX)
            .filter(|entry| !wanted.contains(&entry.key))
            .map(|entry| entry.key.clone())
            .collect();
        for key in stale {
            self.core.forget_handover(&key);
            self.core.forget_rollout(&key);
            self.core.remove_local(now, &key);
        }
        for (entry, rollout) in entries {
            let entry = self.core.roll_out(now, entry, rollout);
            let entry = self.core.hand_over(now, entry);
            let Some(entry) = self.seal(now, entry) else {
                continue;
            };
            let bundles = entry.bundles.clone();
            self.core.upsert_local(now, entry);
            for id in bundles {
                self.core.handle_bundle_stored(now, id);
            }
        }
        self.stored.send_modify(|count| *count += 1);
    }

    /// Signs `revocation` and sends it down the tree.
    pub(super) fn publish_revocation(
        &mut self,
        now: Now,
        revocation: &Revocation,
    ) -> Result<(), String> {
        let entry = revocation.to_entry().map_err(|error| error.to_string())?;
        let entry = self
            .seal(now, entry)
            .ok_or_else(|| "the root cannot sign the revocation".to_string())?;
        self.core.upsert_local(now, entry);
        Ok(())
    }

    /// Every move the slice holds.
    pub(super) fn moves(&self) -> Vec<Move> {
        self.core
            .entries()
            .filter_map(Move::from_entry)
            .filter_map(Result::ok)
            .collect()
    }

    /// Every revocation the slice holds.
    pub(super) fn revocations(&self) -> Vec<Revocation> {
        self.core
            .entries()
            .filter_map(Revocation::from_entry)
            .filter_map(Result::ok)
            .collect()
    }

    /// Publishes bundle `id` (stored already) to every node, as `name`.
    pub(super) fn publish_bundle(&mut self, now: Now, name: String, id: BundleId) {
        // The entry first, then the bundle: a bundle no entry references
        // would be collected at once.
        let entry = SliceEntry {
            key: format!("bundle/{name}"),
            target: Target::Everywhere,
            bundles: vec![id],
            body: name.into_bytes(),
            serial: 0,
            signature: Vec::new(),
        };
        let Some(entry) = self.seal(now, entry) else {
            return;
        };
        self.core.upsert_local(now, entry);
        self.core.handle_bundle_stored(now, id);
        self.stored.send_modify(|count| *count += 1);
    }
}
