//! Answers to queries about this cluster that reach the agent through the
//! tree: live objects ([`Query::Object`]: one, or every managed one of a
//! kind) and recent events ([`Query::Events`]).
//!
//! What the agent shows is its own decision, as what it applies is (see
//! docs/security.md, "Reading from clusters"): only objects relaymesh
//! manages here (applied under a placement, adopted, or a namespace it
//! created), found in the local [`Inventory`]; events only of namespaces
//! holding such objects. A Secret is shown without its data. The object is
//! read live through the same discovery-backed [`Applier`] the reconciler
//! applies with, without `managedFields`; an answer is at most
//! [`MAX_ANSWER_JSON_LEN`] bytes (events are cut to fit, an object that
//! does not fit is refused) and comes within [`READ_TIMEOUT`].

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use relaymesh_node::daemon::AskedQuery;
use relaymesh_protocol::query::{Answer, Observation, Query, MAX_ANSWER_JSON_LEN, MAX_EVENTS};
use relaymesh_protocol::{ErrorCode, Refusal};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::applier::{self, Applier};
use crate::inventory::Inventory;
use crate::manifest::ObjectRef;

/// How long one read of the cluster may take; the relays above wait 10 s
/// for the whole answer, and answer from memory after that.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest event message shown, in bytes; longer ones are cut.
const MAX_MESSAGE_LEN: usize = 1024;

/// The most objects one list answers with ([`Query::Object`] without a
/// name): each is read live, within [`READ_TIMEOUT`] for all.
pub const MAX_LISTED: usize = 50;

/// Reads this cluster to answer queries.
pub struct Answerer {
    cluster: String,
    applier: Applier,
    inventory: Inventory,
}

impl Answerer {
    /// An answerer for cluster `cluster`, reading with `applier` and
    /// judging what it may show by `inventory`.
    pub fn new(cluster: String, applier: Applier, inventory: Inventory) -> Self {
        Self {
            cluster,
            applier,
            inventory,
        }
    }

    /// Answers `queries` one at a time until `shutdown` or until the
    /// daemon drops its end.
    pub async fn serve(
        mut self,
        mut queries: mpsc::Receiver<AskedQuery>,
        shutdown: CancellationToken,
    ) {
        loop {
            let asked = tokio::select! {
                () = shutdown.cancelled() => return,
                asked = queries.recv() => match asked {
                    Some(asked) => asked,
                    None => return,
                },
            };
            let answer = match tokio::time::timeout(READ_TIMEOUT, self.answer(&asked.query)).await {
                Ok(answer) => answer,
                Err(_) => self.failed(
                    ErrorCode::Unavailable,
                    format!(
                        "the cluster did not answer within {}s",
                        READ_TIMEOUT.as_secs()
                    ),
                ),
            };
            let _ = asked.reply.send(answer);
        }
    }

    /// The answer to `query`, read from the cluster now.
    pub async fn answer(&mut self, query: &Query) -> Answer {
        let result = match query {
            Query::Object {
                group,
                version,
                kind,
                namespace,
                name,
            } => {
                let reference = ObjectRef {
                    group: group.clone(),
                    version: version.clone(),
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                };
                if name.is_empty() {
                    self.list(&reference).await.map(Answer::Object)
                } else {
                    self.object(&reference).await.map(Answer::Object)
                }
            }
            Query::Events { namespace, limit } => self
                .events(namespace.as_deref(), *limit)
                .await
                .map(Answer::Events),
            Query::Link => Err((
                ErrorCode::NotFound,
                "a link is measured by the agent's parent".to_string(),
            )),
            // The agent's core answers it from the status it holds; it
            // never reaches the cluster.
            Query::Placement { .. } | Query::Split { .. } => Err((
                ErrorCode::NotFound,
                "placements are answered by the agent's core".to_string(),
            )),
        };
        result.unwrap_or_else(|(code, message)| self.failed(code, message))
    }

    async fn object(&mut self, reference: &ObjectRef) -> Result<Observation, (ErrorCode, String)> {
        let cluster = &self.cluster;
        // A cluster-scoped kind has no namespace, whatever was asked.
        let kind = self.applier.kind(reference).await.map_err(|error| {
            (
                ErrorCode::NotFound,
                format!("{cluster} cannot read {reference}: {error}"),
            )
        })?;
        let mut reference = reference.clone();
        if !kind.namespaced {
            reference.namespace = None;
        }
        let reference = &reference;
        if !self.manages(reference)? {
            return Err((
                ErrorCode::Forbidden,
                format!(
                    "{cluster} shows only objects relaymesh manages there; {reference} is not one"
                ),
            ));
        }
        let unavailable = |error: applier::ApplyError| (ErrorCode::Unavailable, error.to_string());
        let live = self
            .applier
            .get(reference)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| {
                (
                    ErrorCode::NotFound,
                    format!("{reference} does not exist in {cluster}"),
                )
            })?;
        let mut object = applier::into_value(live);
        redact(&mut object);
        let json = serde_json::to_vec(&object)
            .map_err(|error| (ErrorCode::Internal, error.to_string()))?;
        if json.len() > MAX_ANSWER_JSON_LEN {
            return Err((
                ErrorCode::TooLarge,
                format!(
                    "{reference} is {} bytes of JSON, more than the {MAX_ANSWER_JSON_LEN} an answer may carry",
                    json.len()
                ),
            ));
        }
        Ok(self.observation(json))
    }

    /// The objects of `kind`'s kind that relaymesh manages here, in its
    /// namespace (every namespace without one), read live: a `List` of at
    /// most [`MAX_LISTED`] by name, cut further to fit an answer
    /// (`metadata.remainingItemCount` says how many were left out).
    async fn list(&mut self, kind: &ObjectRef) -> Result<Observation, (ErrorCode, String)> {
        let default_namespace = self.applier.client().default_namespace().to_string();
        let inventory =
            |error: crate::inventory::InventoryError| (ErrorCode::Internal, error.to_string());
        let mut managed: BTreeSet<ObjectRef> = self
            .inventory
            .placements()
            .map_err(inventory)?
            .into_values()
            .flat_map(|record| record.objects)
            .chain(self.inventory.adopted().map_err(inventory)?)
            .filter(|object| object.group == kind.group && object.kind == kind.kind)
            .map(|mut object| {
                object.version.clone_from(&kind.version);
                object
            })
            .collect();
        if kind.group.is_empty() && kind.kind == "Namespace" {
            for name in self.inventory.created_namespaces().map_err(inventory)? {
                managed.insert(ObjectRef {
                    name,
                    namespace: None,
                    ..kind.clone()
                });
            }
        }
        let mut items = Vec::new();
        let mut left_out = 0usize;
        for mut reference in managed {
            let namespace = reference.namespace.as_deref().unwrap_or(&default_namespace);
            if kind
                .namespace
                .as_deref()
                .is_some_and(|wanted| wanted != namespace)
            {
                continue;
            }
            if items.len() == MAX_LISTED {
                left_out += 1;
                continue;
            }
            let namespaced = self
                .applier
                .kind(&reference)
                .await
                .map_err(|error| (ErrorCode::NotFound, error.to_string()))?
                .namespaced;
            if namespaced && reference.namespace.is_none() {
                reference.namespace = Some(default_namespace.clone());
            }
            let unavailable =
                |error: applier::ApplyError| (ErrorCode::Unavailable, error.to_string());
            if let Some(live) = self.applier.get(&reference).await.map_err(unavailable)? {
                let mut object = applier::into_value(live);
                redact(&mut object);
                items.push(object);
            }
        }
        let list = |items: &[Value], left_out: usize| {
            let mut list = json!({"apiVersion": "v1", "kind": "List", "items": items});
            if left_out > 0 {
                list["metadata"] = json!({"remainingItemCount": left_out});
            }
            serde_json::to_vec(&list).map_err(|error| (ErrorCode::Internal, error.to_string()))
        };
        let mut json = list(&items, left_out)?;
        while json.len() > MAX_ANSWER_JSON_LEN && items.pop().is_some() {
            left_out += 1;
            json = list(&items, left_out)?;
        }
        Ok(self.observation(json))
    }

    async fn events(
        &mut self,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Observation, (ErrorCode, String)> {
        let shown = self.namespaces()?;
        let namespaces: Vec<String> = match namespace {
            Some(namespace) if shown.contains(namespace) => vec![namespace.to_string()],
            Some(namespace) => {
                return Err((
                    ErrorCode::Forbidden,
                    format!(
                        "{} shows events only of namespaces relaymesh manages objects in; {namespace:?} is not one",
                        self.cluster
                    ),
                ))
            }
            None => shown.into_iter().collect(),
        };
        let limit = limit.clamp(1, MAX_EVENTS) as usize;
        let mut rows = Vec::new();
        for namespace in &namespaces {
            let api: Api<Event> = Api::namespaced(self.applier.client().clone(), namespace);
            let list = api.list(&ListParams::default()).await.map_err(|error| {
                (
                    ErrorCode::Unavailable,
                    format!("cannot list events: {error}"),
                )
            })?;
            rows.extend(list.items.iter().map(summary));
        }
        rows.sort_by(|a, b| b["lastSeen"].as_str().cmp(&a["lastSeen"].as_str()));
        rows.truncate(limit);
        let mut json =
            serde_json::to_vec(&rows).map_err(|error| (ErrorCode::Internal, error.to_string()))?;
        while json.len() > MAX_ANSWER_JSON_LEN && rows.pop().is_some() {
            json = serde_json::to_vec(&rows)
                .map_err(|error| (ErrorCode::Internal, error.to_string()))?;
        }
        Ok(self.observation(json))
    }

    /// Whether relaymesh manages `reference` here (the version aside:
    /// any served version of a managed object may be read).
    fn manages(&self, reference: &ObjectRef) -> Result<bool, (ErrorCode, String)> {
        let default_namespace = self.applier.client().default_namespace().to_string();
        let same = |managed: &ObjectRef| {
            managed.group == reference.group
                && managed.kind == reference.kind
                && managed.name == reference.name
                && (managed.namespace == reference.namespace
                    || (managed.namespace.is_none()
                        && reference.namespace.as_deref() == Some(default_namespace.as_str())))
        };
        let inventory =
            |error: crate::inventory::InventoryError| (ErrorCode::Internal, error.to_string());
        let placements = self.inventory.placements().map_err(inventory)?;
        if placements
            .values()
            .flat_map(|record| &record.objects)
            .any(same)
        {
            return Ok(true);
        }
        if self
            .inventory
            .adopted()
            .map_err(inventory)?
            .iter()
            .any(same)
        {
            return Ok(true);
        }
        let namespace = reference.group.is_empty() && reference.kind == "Namespace";
        Ok(namespace
            && self
                .inventory
                .created_namespaces()
                .map_err(inventory)?
                .contains(&reference.name))
    }

    /// The namespaces holding objects relaymesh manages here.
    fn namespaces(&self) -> Result<BTreeSet<String>, (ErrorCode, String)> {
        let inventory =
            |error: crate::inventory::InventoryError| (ErrorCode::Internal, error.to_string());
        let mut namespaces: BTreeSet<String> = self
            .inventory
            .placements()
            .map_err(inventory)?
            .values()
            .flat_map(|record| &record.objects)
            .chain(self.inventory.adopted().map_err(inventory)?.iter())
            .filter_map(|object| match (&object.namespace, object.kind.as_str()) {
                (Some(namespace), _) => Some(namespace.clone()),
                (None, "Namespace") if object.group.is_empty() => Some(object.name.clone()),
                // Cluster-scoped, or namespaced written without one.
                (None, _) => None,
            })
            .collect();
        namespaces.extend(self.inventory.created_namespaces().map_err(inventory)?);
        Ok(namespaces)
    }

    fn observation(&self, json: Vec<u8>) -> Observation {
        Observation {
            cluster: self.cluster.clone(),
            json,
            age_ms: None,
        }
    }

    fn failed(&self, code: ErrorCode, message: String) -> Answer {
        tracing::debug!(%code, %message, "refused a query");
        Answer::Failed(Refusal::new(code, message))
    }
}

/// Removes what is not shown: `managedFields` (noise), and a Secret's
/// data, in whatever field it might sit.
fn redact(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    let secret = object["kind"] == "Secret" && object["apiVersion"] == "v1";
    if !secret {
        return;
    }
    if let Some(fields) = object.as_object_mut() {
        fields.remove("data");
        fields.remove("stringData");
    }
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        annotations.insert("relaymesh.dev/redacted".into(), json!("data"));
    } else if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert(
            "annotations".into(),
            json!({"relaymesh.dev/redacted": "data"}),
        );
    }
}

/// One event as the answer carries it.
fn summary(event: &Event) -> Value {
    let event = serde_json::to_value(event).unwrap_or(Value::Null);
    let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str);
    let last_seen = text("/lastTimestamp")
        .or_else(|| text("/eventTime"))
        .or_else(|| text("/series/lastObservedTime"))
        .or_else(|| text("/firstTimestamp"))
        .or_else(|| text("/metadata/creationTimestamp"));
    let object = match (text("/involvedObject/kind"), text("/involvedObject/name")) {
        (Some(kind), Some(name)) => format!("{}/{name}", kind.to_lowercase()),
        (_, Some(name)) => name.to_string(),
        _ => String::new(),
    };
    let mut message = text("/message").unwrap_or_default().to_string();
    if message.len() > MAX_MESSAGE_LEN {
        let mut cut = MAX_MESSAGE_LEN;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
    }
    json!({
        "lastSeen": last_seen,
        "type": text("/type"),
        "reason": text("/reason"),
        "object": object,
        "namespace": text("/metadata/namespace"),
        "message": message,
        "count": event.get("count").and_then(Value::as_u64).unwrap_or(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_shown_without_its_data() {
        let mut secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "managedFields": [{}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{}}"}},
            "data": {"password": "aHVudGVyMg=="}, "stringData": {"a": "b"}, "type": "Opaque"
        });
        redact(&mut secret);
        assert!(secret.get("data").is_none() && secret.get("stringData").is_none());
        assert!(secret["metadata"].get("managedFields").is_none());
        assert_eq!(
            secret["metadata"]["annotations"],
            json!({"relaymesh.dev/redacted": "data"})
        );
        assert_eq!(secret["type"], "Opaque");

        let mut config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
        redact(&mut config);
        assert_eq!(config["data"], json!({"a": "b"}));
    }

    #[test]
    fn an_event_is_summarized_with_its_last_time() {
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": "web.1", "namespace": "shop"},
            "involvedObject": {"kind": "Deployment", "name": "web"},
            "reason": "ScalingReplicaSet", "type": "Normal", "count": 3,
            "message": "Scaled up replica set web-1 to 2".repeat(100),
            "lastTimestamp": "2026-11-25T10:00:00Z"
        }))
        .expect("an event");
        let row = summary(&event);
        assert_eq!(row["object"], "deployment/web");
        assert_eq!(row["lastSeen"], "2026-11-25T10:00:00Z");
        assert_eq!(row["count"], 3);
        assert_eq!(row["message"].as_str().map(str::len), Some(MAX_MESSAGE_LEN));
    }
}
