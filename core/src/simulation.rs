//! A tree of real [`Core`]s on a perfect in-memory network, with virtual
//! time: the daemon's code path without its IO.
//!
//! [`Simulation`] plays the daemon for every node at once. It executes each
//! core's [`Action`](crate::Action)s as the `relay` daemon would: a `Persist` is applied to
//! the node's in-memory [`Persisted`] (the model the sled store is checked
//! against, so [`Simulation::restart`] boots a node from exactly what it
//! made durable), a message is handed to the core at the other end of the
//! link at once and in order, a bundle fetch is served from the parent's
//! bundles (only if the parent's core allows it) and checked against its
//! id. Time moves only when told ([`Simulation::advance`],
//! [`Simulation::settle`]); the clock is read once, for the base instant.
//!
//! It is built to scale to a million leaves in one process: a node is its
//! core plus a few words (no per-node thread, channel or buffer), cores
//! with work to do wait in one queue, so delivering a message costs the same
//! in a tree of ten nodes as in one of a million, and every node counts the
//! [`Traffic`] it handled, summed per level by
//! [`Simulation::traffic_by_level`]. With
//! [`SimulationConfig::keep_state`] off, persisted batches are counted but
//! not kept, for runs that never restart a node.
//!
//! ```
//! use relaymesh_core::simulation::{Simulation, SimulationConfig};
//! use relaymesh_protocol::Target;
//!
//! let mut sim = Simulation::new(SimulationConfig::default())?;
//! sim.add_relay("root", None)?;
//! sim.add_relay("eu", Some("root"))?;
//! sim.add_agent("edge-1", "eu", [("region", "eu")])?;
//! sim.settle();
//! let bundle = sim.publish("bundle/demo", Target::Everywhere, b"manifests")?;
//! assert!(sim["edge-1"].bundle(&bundle).is_some());
//! # Ok::<(), relaymesh_core::simulation::SimulationError>(())
//! ```

mod clock;
mod execute;
mod node;
mod root;
mod traffic;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use relaymesh_protocol::message::DownMessage;
use relaymesh_protocol::{BundleId, Refusal, Role};

use crate::seal::{self, SealError};
use crate::state::Persisted;
use crate::{
    Core, CoreConfig, LinkId, LinkStats, Now, DEFAULT_LOG_KEEP, DEFAULT_MAX_RECORDS_PER_CHILD,
    DEFAULT_MAX_STATUS_KEYS_PER_CHILD, INVENTORY_COALESCE,
};
use clock::Clock;
pub use node::Node;
pub use traffic::{LevelTraffic, Traffic};

/// How many timer rounds [`Simulation::settle`] runs at most before it
/// gives up on the tree going quiet (a fetch that fails for ever retries
/// for ever).
pub const SETTLE_ROUNDS: usize = 256;

/// A node of a [`Simulation`], by position (the order nodes were added).
pub type NodeId = usize;

/// How the nodes of a [`Simulation`] are configured.
#[derive(Debug, Clone)]
pub struct SimulationConfig {
    /// How many slice revisions each core keeps in its log.
    pub log_keep: u64,
    /// [`CoreConfig::max_records_per_child`] of every core.
    pub max_records_per_child: usize,
    /// [`CoreConfig::max_status_keys_per_child`] of every core.
    pub max_status_keys_per_child: usize,
    /// Keep each node's persisted state (needed by [`Simulation::restart`]);
    /// off, batches are only counted, which saves a copy of every node's
    /// state in very large runs.
    pub keep_state: bool,
}

impl Default for SimulationConfig {
    fn default() -> Self {
        Self {
            log_keep: DEFAULT_LOG_KEEP,
            max_records_per_child: DEFAULT_MAX_RECORDS_PER_CHILD,
            max_status_keys_per_child: DEFAULT_MAX_STATUS_KEYS_PER_CHILD,
            keep_state: true,
        }
    }
}

/// Why the simulation could not do what it was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimulationError {
    /// No node has this name.
    #[error("no node {0:?} in the simulation")]
    UnknownNode(String),
    /// A node with this name exists already.
    #[error("a node {0:?} exists already")]
    DuplicateNode(String),
    /// The tree has a root already, or has none yet.
    #[error("a simulation has exactly one root: {0}")]
    Root(&'static str),
    /// Only relays have children.
    #[error("{parent:?} is an agent and cannot be {node:?}'s parent")]
    ParentIsAgent {
        /// The node being added.
        node: String,
        /// The agent named as its parent.
        parent: String,
    },
    /// The parent's core refused the child's link.
    #[error("{parent:?} refused {node:?}: {refusal}")]
    Refused {
        /// The child.
        node: String,
        /// The parent.
        parent: String,
        /// The parent's reason.
        #[source]
        refusal: Refusal,
    },
    /// The root could not sign an entry.
    #[error("the root cannot sign: {0}")]
    Seal(#[from] SealError),
}

/// Rewrites a message a node sends down, as a compromised relay would.
type Alteration = Box<dyn FnMut(&mut DownMessage)>;

/// A tree of cores on a perfect network with virtual time; see the module
/// documentation.
pub struct Simulation {
    config: SimulationConfig,
    nodes: Vec<Node>,
    by_name: HashMap<String, NodeId>,
    /// The child at the other end of each open link.
    by_link: HashMap<LinkId, NodeId>,
    root: Option<NodeId>,
    clock: Clock,
    next_link: LinkId,
    /// Nodes whose cores may have actions to execute, in the order they
    /// became so.
    ready: VecDeque<NodeId>,
    /// The root's signing key (PKCS#8) and public key.
    root_key: (Vec<u8>, Vec<u8>),
    /// The last serial the root signed with.
    serial: u64,
    /// While set, bundle fetches wait in `held_fetches` until the caller
    /// completes them.
    hold_fetches: bool,
    held_fetches: Vec<(String, BundleId)>,
    alteration: Option<(NodeId, Alteration)>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("nodes", &self.nodes.len())
            .field("now", &self.clock.elapsed())
            .field("serial", &self.serial)
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// An empty simulation with a fresh root key.
    pub fn new(config: SimulationConfig) -> Result<Self, SimulationError> {
        Ok(Self {
            config,
            nodes: Vec::new(),
            by_name: HashMap::new(),
            by_link: HashMap::new(),
            root: None,
            clock: Clock::new(),
            next_link: 1,
            ready: VecDeque::new(),
            root_key: seal::generate_key()?,
            serial: 1,
            hold_fetches: false,
            held_fetches: Vec::new(),
            alteration: None,
        })
    }

    /// The configuration of nodes booted from now on.
    pub fn config_mut(&mut self) -> &mut SimulationConfig {
        &mut self.config
    }

    /// The virtual time.
    pub fn now(&self) -> Now {
        self.clock.now()
    }

    /// The root's public key, which every core checks entries with.
    pub fn root_key(&self) -> &[u8] {
        &self.root_key.1
    }

    /// The last serial the root signed an entry with.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.by_name.get(name).map(|id| &self.nodes[*id])
    }

    /// Every node, in the order they were added.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter()
    }

    /// How many nodes the tree has.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree has no node yet.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A node's core, to hand it events the simulation does not make (a
    /// status from the agent's cluster, a forged message). Its actions are
    /// executed by the next [`run`](Self::run).
    pub fn core_mut(&mut self, name: &str) -> Option<&mut Core> {
        let id = *self.by_name.get(name)?;
        self.mark_ready(id);
        Some(&mut self.nodes[id].core)
    }

    /// Adds a relay; with a parent, it connects at once. The first relay
    /// without a parent is the root; there can be no second.
    pub fn add_relay(&mut self, name: &str, parent: Option<&str>) -> Result<(), SimulationError> {
        self.add(name, parent, Role::Relay, BTreeMap::new())
    }

    /// Adds an edge agent with its cluster's labels under `parent`, and
    /// connects it.
    pub fn add_agent<K, V>(
        &mut self,
        name: &str,
        parent: &str,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), SimulationError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let labels = labels
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect();
        self.add(name, Some(parent), Role::Agent, labels)
    }

    /// Opens a new link from `name` to its parent, as a child dialing in
    /// does (the parent closes any older link of the same child).
    pub fn connect(&mut self, name: &str) -> Result<(), SimulationError> {
        let id = self.id(name)?;
        let connected = self.connect_node(id);
        self.run();
        connected
    }

    /// Closes the link between `name` and its parent, on both sides.
    pub fn disconnect(&mut self, name: &str) -> Result<(), SimulationError> {
        let id = self.id(name)?;
        self.disconnect_node(id);
        self.run();
        Ok(())
    }

    /// Simulates a crash: `name` and the links to its parent and children
    /// go down, and the node boots again from its persisted state and its
    /// bundles. Nothing reconnects by itself.
    pub fn restart(&mut self, name: &str) -> Result<(), SimulationError> {
        let id = self.id(name)?;
        self.disconnect_node(id);
        let children: Vec<NodeId> = (0..self.nodes.len())
            .filter(|child| {
                self.nodes[*child].parent == Some(id) && self.nodes[*child].link.is_some()
            })
            .collect();
        for child in children {
            self.disconnect_node(child);
        }
        self.run();
        let node = &self.nodes[id];
        let labels = node.core.own_record().labels.to_map();
        let core = self.boot_core(
            &node.name,
            node.role,
            node.parent,
            &labels,
            &node.persisted,
            &node.bundles,
        );
        self.nodes[id].core = core;
        self.mark_ready(id);
        self.run();
        Ok(())
    }

    /// Hands `name`'s parent the transport's measure of the link to `name`,
    /// as the daemon does about once a second, and executes what follows.
    /// Does nothing while `name` has no link.
    pub fn report_link_stats(
        &mut self,
        name: &str,
        stats: LinkStats,
    ) -> Result<(), SimulationError> {
        let id = self.id(name)?;
        let (Some(parent), Some(link)) = (self.nodes[id].parent, self.nodes[id].link) else {
            return Ok(());
        };
        let now = self.now();
        self.nodes[parent].traffic.events += 1;
        self.nodes[parent].core.handle_link_stats(now, link, stats);
        self.mark_ready(parent);
        self.run();
        Ok(())
    }

    /// Has `name`'s daemon ask `query` of `node` (as the root's API does),
    /// and executes what follows; the answer, once it came back, is
    /// [`Node::answer`] of the returned id.
    pub fn query(
        &mut self,
        name: &str,
        node: &str,
        query: relaymesh_protocol::query::Query,
    ) -> Result<crate::QueryId, SimulationError> {
        let id = self.id(name)?;
        let now = self.now();
        let query = self.nodes[id].core.query(now, node, query);
        self.mark_ready(id);
        self.run();
        Ok(query)
    }

    /// Moves virtual time on by `by`, runs every timer then due, and
    /// executes what follows.
    pub fn advance(&mut self, by: Duration) {
        self.clock.advance(by);
        self.fire_timers();
        self.run();
    }

    /// Lets the tree go quiet: moves time from timer to timer (each at
    /// least one inventory coalescing period on) until no core has one
    /// pending, so inventory and status climb every level. Returns whether
    /// it went quiet within [`SETTLE_ROUNDS`].
    pub fn settle(&mut self) -> bool {
        self.run();
        for _ in 0..SETTLE_ROUNDS {
            let next = self
                .nodes
                .iter()
                .filter_map(|node| node.core.poll_timeout())
                .min();
            let Some(next) = next else {
                return true;
            };
            let step = next
                .saturating_duration_since(self.now().instant)
                .max(INVENTORY_COALESCE);
            self.advance(step);
        }
        false
    }

    /// Executes actions until every core is quiet (time does not move).
    pub fn run(&mut self) {
        while let Some(id) = self.ready.pop_front() {
            self.nodes[id].ready = false;
            while let Some(action) = self.nodes[id].core.poll_action() {
                self.execute(id, action);
            }
        }
    }

    /// While `hold` is set, bundle fetches are not served but kept in
    /// [`held_fetches`](Self::held_fetches), so a test can see how many are
    /// in flight and complete them itself through [`core_mut`](Self::core_mut).
    pub fn hold_fetches(&mut self, hold: bool) {
        self.hold_fetches = hold;
    }

    /// The fetches held so far: which node asked for which bundle.
    pub fn held_fetches(&self) -> &[(String, BundleId)] {
        &self.held_fetches
    }

    /// From now on, every message `name` sends down is first passed through
    /// `alter`, as a compromised relay would rewrite it.
    pub fn alter_down(
        &mut self,
        name: &str,
        alter: impl FnMut(&mut DownMessage) + 'static,
    ) -> Result<(), SimulationError> {
        let id = self.id(name)?;
        self.alteration = Some((id, Box::new(alter)));
        Ok(())
    }

    /// What every level handled, from the root's (level 0) down.
    pub fn traffic_by_level(&self) -> Vec<LevelTraffic> {
        traffic::by_level(&self.nodes)
    }

    fn id(&self, name: &str) -> Result<NodeId, SimulationError> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| SimulationError::UnknownNode(name.to_string()))
    }

    fn add(
        &mut self,
        name: &str,
        parent: Option<&str>,
        role: Role,
        labels: BTreeMap<String, String>,
    ) -> Result<(), SimulationError> {
        if self.by_name.contains_key(name) {
            return Err(SimulationError::DuplicateNode(name.to_string()));
        }
        let parent = match parent {
            Some(parent) => {
                let id = self.id(parent)?;
                if self.nodes[id].role == Role::Agent {
                    return Err(SimulationError::ParentIsAgent {
                        node: name.to_string(),
                        parent: parent.to_string(),
                    });
                }
                Some(id)
            }
            None if self.root.is_some() => return Err(SimulationError::Root("it has one already")),
            None => None,
        };
        let id = self.nodes.len();
        let persisted = Persisted {
            epoch: 1000 + id as u64,
            ..Persisted::default()
        };
        let depth = parent.map_or(0, |parent| self.nodes[parent].depth + 1);
        let core = self.boot_core(name, role, parent, &labels, &persisted, &[]);
        let node = Node {
            name: name.to_string(),
            core,
            persisted,
            bundles: Vec::new(),
            parent,
            moving_to: None,
            depth,
            role,
            link: None,
            revocations: Vec::new(),
            answers: BTreeMap::new(),
            asked: Vec::new(),
            traffic: Traffic::default(),
            renewals: 0,
            ready: false,
        };
        self.nodes.push(node);
        self.by_name.insert(name.to_string(), id);
        if parent.is_none() {
            self.root = Some(id);
        }
        self.mark_ready(id);
        self.run();
        if parent.is_some() {
            self.connect(name)?;
        }
        Ok(())
    }

    /// A core for a node, from its persisted state and bundles.
    fn boot_core(
        &self,
        name: &str,
        role: Role,
        parent: Option<NodeId>,
        labels: &BTreeMap<String, String>,
        persisted: &Persisted,
        bundles: &[(BundleId, Arc<[u8]>)],
    ) -> Core {
        let addresses = match role {
            Role::Agent => Vec::new(),
            _ => vec![format!("{name}:7443")],
        };
        let config = CoreConfig {
            name: name.to_string(),
            role,
            parent: parent.map(|parent| self.nodes[parent].name.clone()),
            labels: labels.clone(),
            capacity: BTreeMap::new(),
            addresses,
            version: "simulation".into(),
            log_keep: self.config.log_keep,
            root_key: self.root_key.1.clone(),
            max_records_per_child: self.config.max_records_per_child,
            max_status_keys_per_child: self.config.max_status_keys_per_child,
        };
        let held = bundles.iter().map(|(id, _)| *id).collect();
        Core::new(config, persisted.clone(), held, self.now())
    }

    fn connect_node(&mut self, id: NodeId) -> Result<(), SimulationError> {
        let Some(parent) = self.nodes[id].parent else {
            return Err(SimulationError::Root("the root has no parent to dial"));
        };
        if let Some(old) = self.nodes[id].link.take() {
            // The parent closes the old link when it sees the new one.
            self.by_link.remove(&old);
        }
        let link = self.next_link;
        self.next_link += 1;
        let now = self.now();
        let node = &mut self.nodes[id];
        node.link = Some(link);
        let (name, role, hello) = (node.name.clone(), node.role, node.core.hello());
        self.by_link.insert(link, id);
        self.nodes[parent].traffic.events += 1;
        let accepted = self.nodes[parent]
            .core
            .handle_child_connected(now, link, &name, role, hello);
        self.mark_ready(parent);
        accepted.map_err(|refusal| {
            self.nodes[id].link = None;
            self.by_link.remove(&link);
            SimulationError::Refused {
                node: name,
                parent: self.nodes[parent].name.clone(),
                refusal,
            }
        })
    }

    /// What a daemon does on [`Action::Move`](crate::Action::Move) once it
    /// joined `to`: the core tells its parent it leaves; once the parent
    /// closed the link, the node dials `to` (see [`Self::disconnect_node`]).
    fn start_move(&mut self, id: NodeId, to: &str) {
        let Some(&to) = self.by_name.get(to) else {
            return;
        };
        let now = self.now();
        let name = self.nodes[to].name.clone();
        self.nodes[id].moving_to = Some(to);
        self.nodes[id].core.re_parent(now, &name);
        self.mark_ready(id);
    }

    fn disconnect_node(&mut self, id: NodeId) {
        let Some(link) = self.nodes[id].link.take() else {
            return;
        };
        self.by_link.remove(&link);
        let now = self.now();
        if let Some(parent) = self.nodes[id].parent {
            self.nodes[parent].traffic.events += 1;
            self.nodes[parent].core.handle_child_disconnected(now, link);
            self.mark_ready(parent);
        }
        self.nodes[id].traffic.events += 1;
        self.nodes[id].core.handle_parent_disconnected(now);
        self.mark_ready(id);
        if let Some(to) = self.nodes[id].moving_to.take() {
            self.nodes[id].parent = Some(to);
            self.nodes[id].depth = self.nodes[to].depth + 1;
            if let Err(error) = self.connect_node(id) {
                tracing::error!(%error, "a moved node could not dial its new parent");
            }
        }
    }

    fn fire_timers(&mut self) {
        let now = self.now();
        for id in 0..self.nodes.len() {
            let node = &mut self.nodes[id];
            if node.core.poll_timeout().is_some_and(|at| at <= now.instant) {
                node.traffic.events += 1;
                node.core.handle_timeout(now);
                self.mark_ready(id);
            }
        }
    }

    fn mark_ready(&mut self, id: NodeId) {
        let node = &mut self.nodes[id];
        if !node.ready {
            node.ready = true;
            self.ready.push_back(id);
        }
    }
}

impl std::ops::Index<&str> for Simulation {
    type Output = Node;

    /// The node called `name`.
    ///
    /// # Panics
    ///
    /// If there is none, as a map's index does; [`Simulation::node`] does
    /// not panic.
    fn index(&self, name: &str) -> &Node {
        match self.node(name) {
            Some(node) => node,
            None => panic!("no node {name:?} in the simulation"),
        }
    }
}

#[cfg(test)]
mod tests;
