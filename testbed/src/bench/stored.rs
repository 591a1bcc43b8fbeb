//! When each hollow agent's store first held a bundle: the time a payload
//! reached every receiver's disk, before the agent applied it. It is the
//! figure to set beside a message system's "every subscriber received"
//! (`testbed bench nats`), which ends where relaymesh's apply begins.
//!
//! Each agent's store is watched for the insert that makes a bundle held
//! ([`relaymesh_node::store::Store::watch_bundles`]), so the time is the
//! commit's, not a poll's.

use std::collections::BTreeMap;

use relaymesh_node::store::Store;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Watches stores for their first bundle from now on.
pub struct FirstBundles {
    tasks: JoinSet<(String, Instant)>,
}

impl FirstBundles {
    /// Starts watching every store of `stores` (agent name, store); a bundle
    /// held before this call does not count.
    pub fn watch<'a>(stores: impl IntoIterator<Item = (&'a str, &'a Store)>) -> Self {
        let mut tasks = JoinSet::new();
        for (name, store) in stores {
            let mut events = store.watch_bundles();
            let name = name.to_string();
            tasks.spawn(async move {
                loop {
                    match (&mut events).await {
                        Some(sled::Event::Insert { .. }) => return (name, Instant::now()),
                        Some(sled::Event::Remove { .. }) => continue,
                        // The store closed: the agent is gone; never held.
                        None => std::future::pending::<()>().await,
                    }
                }
            });
        }
        Self { tasks }
    }

    /// Each store's seconds after `start` until its first bundle, by agent
    /// name, for those that held one by `deadline`; stops watching.
    pub async fn collect(mut self, start: Instant, deadline: Instant) -> BTreeMap<String, f64> {
        let mut held = BTreeMap::new();
        while let Ok(Some(done)) = tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
            if let Ok((name, at)) = done {
                held.insert(name, at.saturating_duration_since(start).as_secs_f64());
            }
        }
        self.tasks.shutdown().await;
        held
    }
}
