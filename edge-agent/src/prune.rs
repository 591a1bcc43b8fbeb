//! ApplySet bookkeeping (KEP-3659) and pruning.
//!
//! Each placement is one ApplySet. Its parent is a ConfigMap in the
//! `relaymesh-system` namespace, labelled `applyset.kubernetes.io/id` and
//! annotated with the tooling and the group-kinds and namespaces its members
//! span, so `kubectl` and other tools can see what relaymesh manages. Every
//! member carries `applyset.kubernetes.io/part-of=<id>`.
//!
//! An object is pruned only if the local inventory records it for the
//! placement *and* the live object carries the placement's part-of label:
//! an object relaymesh did not create is never touched. An object the agent
//! adopted (it existed before; see [`crate::policy`]) is released instead
//! of deleted: its part-of label is removed and it stays.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::json;

use crate::applier::{self, Applier, ApplyError};
use crate::manifest::{Manifest, ObjectRef, PART_OF_LABEL};
use crate::policy::{self, PruneAction};

/// The namespace of the ApplySet parents.
pub const SYSTEM_NAMESPACE: &str = "relaymesh-system";
/// The label that names an ApplySet on its parent.
pub const ID_LABEL: &str = "applyset.kubernetes.io/id";
/// The annotation naming the tool that manages an ApplySet.
pub const TOOLING_ANNOTATION: &str = "applyset.kubernetes.io/tooling";
/// The annotation listing the group-kinds of an ApplySet's members.
pub const GROUP_KINDS_ANNOTATION: &str = "applyset.kubernetes.io/contains-group-kinds";
/// The annotation listing the namespaces of an ApplySet's members.
pub const NAMESPACES_ANNOTATION: &str = "applyset.kubernetes.io/additional-namespaces";

/// The ApplySet of one placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplySet {
    /// The id, the value of every member's part-of label.
    pub id: String,
    /// The parent ConfigMap's name (in [`SYSTEM_NAMESPACE`]).
    pub parent_name: String,
}

impl ApplySet {
    /// The ApplySet of the placement with slice key `key`
    /// (`placement/NS/NAME`).
    pub fn of(key: &str) -> Self {
        let parent_name = parent_name(key);
        // KEP-3659: base64url(sha256("<name>.<namespace>.<kind>.<group>")),
        // with the parent's kind and group (empty for core).
        let identity = format!("{parent_name}.{SYSTEM_NAMESPACE}.ConfigMap.");
        let digest = ring::digest::digest(&ring::digest::SHA256, identity.as_bytes());
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
        Self {
            id: format!("applyset-{encoded}-v1"),
            parent_name,
        }
    }

    /// The parent ConfigMap's reference.
    pub fn parent(&self) -> ObjectRef {
        ObjectRef {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(SYSTEM_NAMESPACE.into()),
            name: self.parent_name.clone(),
        }
    }

    /// Writes the parent for members `objects` (creating the system
    /// namespace if needed).
    pub async fn write_parent(
        &self,
        applier: &mut Applier,
        objects: &BTreeSet<ObjectRef>,
    ) -> Result<(), ApplyError> {
        applier.ensure_namespace(SYSTEM_NAMESPACE).await?;
        let group_kinds: BTreeSet<String> = objects
            .iter()
            .map(|object| match object.group.as_str() {
                "" => object.kind.clone(),
                group => format!("{}.{group}", object.kind),
            })
            .collect();
        let namespaces: BTreeSet<&str> = objects
            .iter()
            .filter_map(|object| object.namespace.as_deref())
            .filter(|namespace| *namespace != SYSTEM_NAMESPACE)
            .collect();
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.parent_name,
                "namespace": SYSTEM_NAMESPACE,
                "labels": {ID_LABEL: self.id},
                "annotations": {
                    TOOLING_ANNOTATION: format!("relaymesh/{}", env!("CARGO_PKG_VERSION")),
                    GROUP_KINDS_ANNOTATION: join(group_kinds.iter().map(String::as_str)),
                    NAMESPACES_ANNOTATION: join(namespaces.into_iter()),
                },
            },
        });
        let manifest = Manifest {
            reference: self.parent(),
            body,
            create_only: false,
        };
        applier.apply(&manifest).await.map(|_| ())
    }

    /// Deletes the parent.
    pub async fn delete_parent(&self, applier: &mut Applier) -> Result<(), ApplyError> {
        applier.delete(&self.parent()).await
    }
}

/// What pruning one object did.
#[derive(Debug)]
pub enum Pruned {
    /// Deleted.
    Deleted,
    /// Gone already.
    Missing,
    /// Left alone: the live object is not (or no longer) ours.
    NotOurs,
    /// Adopted, so released: our part-of label removed, the object kept.
    Released,
}

/// Deletes `object` if the live object is a member of `applyset`, or only
/// releases it from the ApplySet if the agent `adopted` it.
pub async fn prune_object(
    applier: &mut Applier,
    applyset: &ApplySet,
    object: &ObjectRef,
    adopted: bool,
) -> Result<Pruned, ApplyError> {
    let Some(live) = applier.get(object).await? else {
        return Ok(Pruned::Missing);
    };
    let member = live
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(PART_OF_LABEL))
        == Some(&applyset.id);
    if !member {
        tracing::info!(object = %object, "not pruning an object without our part-of label");
        return Ok(Pruned::NotOurs);
    }
    match policy::prune_action(adopted) {
        PruneAction::Release => {
            applier.remove_label(object, PART_OF_LABEL).await?;
            tracing::info!(object = %object, "released an adopted object (it existed before relaymesh; not deleting it)");
            Ok(Pruned::Released)
        }
        PruneAction::Delete => {
            applier.delete(object).await?;
            tracing::info!(object = %object, "pruned");
            Ok(Pruned::Deleted)
        }
    }
}

/// Deletes the namespaces in `created` that relaymesh created (still
/// labelled so), that hold nothing in `in_use`, and that hold no one else's
/// objects either; returns those still kept.
pub async fn prune_namespaces(
    applier: &mut Applier,
    created: &BTreeSet<String>,
    in_use: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut kept = BTreeSet::new();
    for namespace in created {
        if in_use.contains(namespace) {
            kept.insert(namespace.clone());
            continue;
        }
        let reference = applier::namespace_ref(namespace);
        let ours = match applier.get(&reference).await {
            Ok(Some(live)) => {
                live.metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(applier::CREATED_BY_LABEL))
                    .map(String::as_str)
                    == Some(applier::FIELD_MANAGER)
            }
            Ok(None) => continue,
            Err(error) => {
                tracing::warn!(namespace, %error, "cannot read a namespace we created");
                kept.insert(namespace.clone());
                continue;
            }
        };
        if !ours {
            continue;
        }
        match applier.namespace_is_empty(namespace).await {
            Ok(true) => {}
            Ok(false) => {
                // Someone else's objects live there; keep it and look again
                // on the next pass.
                kept.insert(namespace.clone());
                continue;
            }
            Err(error) => {
                tracing::warn!(namespace, %error, "cannot tell whether a namespace we created is empty");
                kept.insert(namespace.clone());
                continue;
            }
        }
        match applier.delete(&reference).await {
            Ok(()) => tracing::info!(namespace, "deleted the namespace relaymesh created"),
            Err(error) => {
                tracing::warn!(namespace, %error, "cannot delete a namespace we created");
                kept.insert(namespace.clone());
            }
        }
    }
    kept
}

/// The ApplySet parent's name for slice key `key`: `placement/NS/NAME`
/// becomes `placement.NS.NAME`, a valid object name.
fn parent_name(key: &str) -> String {
    let name: String = key
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '.' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '.',
        })
        .collect();
    let name = name.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    name.chars().take(253).collect()
}

fn join<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items.collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        let set = ApplySet::of("placement/shop/web");
        assert_eq!(set.parent_name, "placement.shop.web");
        assert_eq!(set, ApplySet::of("placement/shop/web"));
        assert_ne!(set.id, ApplySet::of("placement/shop/api").id);
        assert!(set.id.starts_with("applyset-") && set.id.ends_with("-v1"));
        // A label value: at most 63 characters.
        assert!(set.id.len() <= 63, "{}", set.id);
    }
}
