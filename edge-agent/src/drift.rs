//! Watches on the kinds the agent applied, so it learns of drift and status
//! changes as they happen instead of polling.
//!
//! One kube-runtime watcher per applied kind, across all namespaces, on
//! objects carrying an ApplySet part-of label. Every object it reports is
//! forwarded to the reconciler as a [`ClusterEvent`]; the reconciler decides
//! whether it is drift (a deleted or changed managed object), a status
//! change, or nothing. The watcher relists after a broken watch, so drift
//! that happened while it was down is still seen.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt as _;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::applier::into_value;
use crate::manifest::{ObjectRef, PART_OF_LABEL};

/// What a watch tells the reconciler.
#[derive(Debug, Clone)]
pub enum ClusterEvent {
    /// A managed object changed or was deleted.
    Object(ObjectEvent),
    /// The watch on a kind listed its objects (when it started, and again
    /// after a break it could not resume from, 410 Gone): the managed
    /// objects of that kind the list did not hold are gone, which no
    /// deletion event reports.
    Listed {
        /// The kind.
        resource: ApiResource,
        /// The namespace and name of every object the list held.
        present: BTreeSet<(Option<String>, String)>,
    },
}

/// Something happened to a managed object in the cluster.
#[derive(Debug, Clone)]
pub struct ObjectEvent {
    /// Which object.
    pub reference: ObjectRef,
    /// The ApplySet it says it belongs to.
    pub applyset_id: Option<String>,
    /// The live object; `None` when it was deleted.
    pub object: Option<Value>,
}

/// The running watchers, one per kind.
pub struct Watches {
    client: Client,
    events: mpsc::Sender<ClusterEvent>,
    running: BTreeMap<(String, String, String), JoinHandle<()>>,
}

impl Watches {
    /// No watchers yet; events go to `events`.
    pub fn new(client: Client, events: mpsc::Sender<ClusterEvent>) -> Self {
        Self {
            client,
            events,
            running: BTreeMap::new(),
        }
    }

    /// Watches objects of `resource` unless that kind is watched already.
    pub fn watch(&mut self, resource: &ApiResource) {
        let key = (
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
        );
        if self
            .running
            .get(&key)
            .is_some_and(|task| !task.is_finished())
        {
            return;
        }
        tracing::debug!(kind = %resource.kind, group = %resource.group, "watching applied kind");
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let task = tokio::spawn(forward(api, resource.clone(), self.events.clone()));
        self.running.insert(key, task);
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for task in self.running.values() {
            task.abort();
        }
    }
}

async fn forward(
    api: Api<DynamicObject>,
    resource: ApiResource,
    events: mpsc::Sender<ClusterEvent>,
) {
    let config = watcher::Config::default().labels(PART_OF_LABEL);
    let mut stream = watcher(api, config).default_backoff().boxed();
    // What the list under way held so far.
    let mut listing: Option<BTreeSet<(Option<String>, String)>> = None;
    while let Some(item) = stream.next().await {
        let (object, deleted) = match item {
            Ok(watcher::Event::Apply(object)) => (object, false),
            Ok(watcher::Event::InitApply(object)) => {
                if let (Some(present), Some(name)) = (&mut listing, &object.metadata.name) {
                    present.insert((object.metadata.namespace.clone(), name.clone()));
                }
                (object, false)
            }
            Ok(watcher::Event::Delete(object)) => (object, true),
            Ok(watcher::Event::Init) => {
                listing = Some(BTreeSet::new());
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(present) = listing.take() {
                    let resource = resource.clone();
                    if events
                        .send(ClusterEvent::Listed { resource, present })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                continue;
            }
            Err(error) => {
                tracing::debug!(kind = %resource.kind, %error, "watch interrupted; retrying");
                continue;
            }
        };
        let Some(name) = object.metadata.name.clone() else {
            continue;
        };
        let reference = ObjectRef {
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
            namespace: object.metadata.namespace.clone(),
            name,
        };
        let applyset_id = object
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(PART_OF_LABEL))
            .cloned();
        let event = ClusterEvent::Object(ObjectEvent {
            reference,
            applyset_id,
            object: (!deleted).then(|| into_value(object)),
        });
        if events.send(event).await.is_err() {
            return;
        }
    }
}
