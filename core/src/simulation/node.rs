//! One node of a simulation: its core and what its daemon would hold
//! besides (the durable state, the bundles, the link to its parent).

use std::collections::BTreeMap;
use std::sync::Arc;

use relaymesh_protocol::query::{Answer, Query};
use relaymesh_protocol::{BundleId, NodeRecord, Revocation, Role};

use super::{NodeId, Traffic};
use crate::state::Persisted;
use crate::{Core, QueryId};

/// A relay or agent of a [`Simulation`](super::Simulation).
#[derive(Debug)]
pub struct Node {
    pub(super) name: String,
    pub(super) core: Core,
    /// What the node made durable (empty unless the simulation keeps state).
    pub(super) persisted: Persisted,
    /// Bundles are shared, not copied: a million agents holding the same
    /// bundle hold one buffer. A node holds few, so a list is smaller than
    /// a map.
    pub(super) bundles: Vec<(BundleId, Arc<[u8]>)>,
    pub(super) parent: Option<NodeId>,
    /// The parent it dials once its old parent closed the link (a move).
    pub(super) moving_to: Option<NodeId>,
    /// 0 at the root.
    pub(super) depth: usize,
    pub(super) role: Role,
    /// The link its parent knows it by, while connected.
    pub(super) link: Option<crate::LinkId>,
    /// The revocations its daemon was told of.
    pub(super) revocations: Vec<Revocation>,
    /// The answers to the queries its daemon asked, by id.
    pub(super) answers: BTreeMap<QueryId, Answer>,
    /// The queries its core handed its daemon to answer
    /// ([`Action::Asked`](crate::Action::Asked)), in order; a test answers
    /// them with [`Core::handle_local_answer`].
    pub(super) asked: Vec<(QueryId, Query)>,
    pub(super) traffic: Traffic,
    /// How many times its core had it renew its certificate.
    pub(super) renewals: u32,
    /// Whether it waits in the simulation's queue of cores to run.
    pub(super) ready: bool,
}

impl Node {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many times its core had it renew its certificate
    /// ([`Action::RenewCertificate`](crate::Action::RenewCertificate)).
    pub fn renewals(&self) -> u32 {
        self.renewals
    }

    /// Its core.
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// What it made durable so far.
    pub fn persisted(&self) -> &Persisted {
        &self.persisted
    }

    /// Relay or agent.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Its level: 0 at the root, 1 for the root's children, and so on.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The link its parent knows it by, while connected.
    pub fn link(&self) -> Option<crate::LinkId> {
        self.link
    }

    /// A bundle it holds.
    pub fn bundle(&self, id: &BundleId) -> Option<&[u8]> {
        self.bundles
            .iter()
            .find(|(held, _)| held == id)
            .map(|(_, bytes)| &bytes[..])
    }

    /// How many bundles it holds.
    pub fn bundle_count(&self) -> usize {
        self.bundles.len()
    }

    /// Whether its slice holds an entry with this key.
    pub fn holds(&self, key: &str) -> bool {
        self.core.entries().any(|entry| entry.key == key)
    }

    /// The inventory record it holds of `name` (itself or a node below).
    pub fn record(&self, name: &str) -> Option<NodeRecord> {
        self.core
            .nodes()
            .into_iter()
            .find(|record| record.name == name)
    }

    /// The answer to the query [`Simulation::query`](super::Simulation::query)
    /// started here under `id`, once it arrived.
    pub fn answer(&self, id: QueryId) -> Option<&Answer> {
        self.answers.get(&id)
    }

    /// The queries its core handed its daemon to answer, in order.
    pub fn asked(&self) -> &[(QueryId, Query)] {
        &self.asked
    }

    /// The revocations its daemon was told of, in order.
    pub fn revocations(&self) -> &[Revocation] {
        &self.revocations
    }

    /// What it handled and sent.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }
}

impl Node {
    /// Keeps a bundle (once).
    pub(super) fn store_bundle(&mut self, id: BundleId, bytes: Arc<[u8]>) {
        if self.bundle(&id).is_none() {
            self.bundles.push((id, bytes));
        }
    }

    /// A bundle it holds, shared.
    pub(super) fn shared_bundle(&self, id: &BundleId) -> Option<Arc<[u8]>> {
        self.bundles
            .iter()
            .find(|(held, _)| held == id)
            .map(|(_, bytes)| bytes.clone())
    }
}
