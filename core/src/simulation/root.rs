//! What the root's daemon does in a simulation: signs entries with the
//! next serial, publishes them (with their bundles), and orders moves and
//! grants of candidate parents, as the real root does through its loop.

use std::collections::BTreeMap;
use std::sync::Arc;

use relaymesh_protocol::{BundleId, SliceEntry, Target};

use super::{Simulation, SimulationError};
use crate::rollouts::RolloutInput;
use crate::seal::{self, SealError};

impl Simulation {
    /// Has the root's daemon sign with `key` (PKCS#8 and public key) from
    /// now on, as after a rotation of its key; returns the key it signed
    /// with until now.
    pub fn replace_root_key(&mut self, key: (Vec<u8>, Vec<u8>)) -> (Vec<u8>, Vec<u8>) {
        std::mem::replace(&mut self.root_key, key)
    }

    /// `entry` signed as the root's daemon signs a new version, with the
    /// next serial ([`seal::next_serial`]; the virtual clock's milliseconds
    /// stand for the time).
    pub fn sign(&mut self, mut entry: SliceEntry) -> Result<SliceEntry, SimulationError> {
        let held = self.root.and_then(|root| {
            self.nodes[root]
                .core
                .entries()
                .find(|held| held.key == entry.key)
        });
        // Above every serial signed so far too, as a root's wall clock is.
        let serial = seal::next_serial(held, self.now().unix_ms).max(self.serial + 1);
        seal::sign(&self.root_key.0, &mut entry, serial)?;
        self.serial = serial;
        Ok(entry)
    }

    /// Signs `entry` and adds or replaces it at the root, as the root's API
    /// does, with the bundles it references stored alongside; runs.
    pub fn upsert_at_root(
        &mut self,
        entry: SliceEntry,
        bundles: &[&[u8]],
    ) -> Result<(), SimulationError> {
        let entry = self.sign(entry)?;
        let root = self.root.ok_or(SimulationError::Root("it has none yet"))?;
        let now = self.now();
        let node = &mut self.nodes[root];
        node.core.upsert_local(now, entry);
        for bytes in bundles {
            let id = BundleId::of(bytes);
            node.store_bundle(id, Arc::from(*bytes));
            node.core.handle_bundle_stored(now, id);
        }
        self.mark_ready(root);
        self.run();
        Ok(())
    }

    /// Places `entry` at the root as the root's daemon does with the
    /// placement controller's entries: shaped by its rollout
    /// ([`Core::roll_out`](crate::Core::roll_out)), handed over, signed and
    /// upserted; runs.
    pub fn place(
        &mut self,
        entry: SliceEntry,
        rollout: RolloutInput,
    ) -> Result<(), SimulationError> {
        let root = self.root.ok_or(SimulationError::Root("it has none yet"))?;
        let now = self.now();
        let core = &mut self.nodes[root].core;
        let entry = core.roll_out(now, entry, rollout);
        let entry = core.hand_over(now, entry);
        self.upsert_at_root(entry, &[])
    }

    /// Has the root's core decide the next wave of every rollout from what
    /// the tree reported, as it does when the root's status is read, and
    /// signs and upserts the entries it changed; runs. Returns how many
    /// changed.
    pub fn advance_rollouts(
        &mut self,
        gates_open: &BTreeMap<String, bool>,
    ) -> Result<usize, SimulationError> {
        let root = self.root.ok_or(SimulationError::Root("it has none yet"))?;
        let now = self.now();
        let changed = self.nodes[root].core.advance_rollouts(now, gates_open);
        let count = changed.len();
        for entry in changed {
            self.upsert_at_root(entry, &[])?;
        }
        Ok(count)
    }

    /// Orders `node` to move under relay `to`, as `relayctl move` does (the
    /// root signs the move; the simulation needs no token), and runs: the
    /// node leaves its parent once the move reaches it and dials `to`.
    pub fn move_node(&mut self, node: &str, to: &str) -> Result<(), SimulationError> {
        let id = self.id(node)?;
        let from = self.nodes[id]
            .parent
            .map(|parent| self.nodes[parent].name.clone())
            .ok_or(SimulationError::Root("the root has no parent to leave"))?;
        let moved = relaymesh_protocol::Move {
            node: node.to_string(),
            from,
            to: to.to_string(),
            token: String::new(),
            at_unix_ms: self.now().unix_ms,
            state: relaymesh_protocol::MoveState::Moving,
        };
        let entry = moved.to_entry().map_err(|error| {
            SimulationError::Seal(SealError::Encode {
                key: moved.key(),
                reason: error.to_string(),
            })
        })?;
        self.upsert_at_root(entry, &[])
    }

    /// Grants `node` the candidate parents `relays`, as `relayctl token
    /// create --parent … --parent …` does (signed at the root), and runs.
    pub fn grant_parents(&mut self, node: &str, relays: &[&str]) -> Result<(), SimulationError> {
        let grant = relaymesh_protocol::Parents {
            node: node.to_string(),
            candidates: relays
                .iter()
                .map(|relay| relaymesh_protocol::CandidateParent {
                    name: relay.to_string(),
                    addresses: Vec::new(),
                    issuers: Vec::new(),
                    issuer_key: [0; 32],
                })
                .collect(),
            current: None,
        };
        let entry = grant.to_entry().map_err(|error| {
            SimulationError::Seal(SealError::Encode {
                key: grant.key(),
                reason: error.to_string(),
            })
        })?;
        self.upsert_at_root(entry, &[])
    }

    /// `node`'s parent went away and its uplink reached `to`, one of its
    /// candidate parents, as the daemon's does once the grace period is
    /// over: the node re-parents and dials `to`; runs.
    pub fn fail_over(&mut self, node: &str, to: &str) -> Result<(), SimulationError> {
        let id = self.id(node)?;
        let to = self.id(to)?;
        self.disconnect_node(id);
        let now = self.now();
        let name = self.nodes[to].name.clone();
        self.nodes[id].core.fail_over(now, &name);
        self.nodes[id].parent = Some(to);
        self.nodes[id].depth = self.nodes[to].depth + 1;
        self.mark_ready(id);
        let connected = self.connect_node(id);
        self.run();
        connected
    }

    /// Publishes at the root an entry `key` for `target` whose body is the
    /// key and which references one bundle, `bytes`; runs.
    pub fn publish(
        &mut self,
        key: &str,
        target: Target,
        bytes: &[u8],
    ) -> Result<BundleId, SimulationError> {
        let id = BundleId::of(bytes);
        let entry = SliceEntry {
            key: key.into(),
            target,
            bundles: vec![id],
            body: key.as_bytes().to_vec(),
            serial: 0,
            signature: Vec::new(),
        };
        self.upsert_at_root(entry, &[bytes])?;
        Ok(id)
    }
}
