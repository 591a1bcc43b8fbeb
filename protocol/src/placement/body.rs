//! The body of a placement's slice entry: what an edge agent needs of the
//! Placement's spec besides its target and bundles, in typed form.
//!
//! The root reads and checks a Placement's JSON once, when it admits it
//! (`relaymesh_topology::spec`), and writes this body from what it read.
//! Agents decode it with the protocol's codec; no node below the root reads
//! the Placement's JSON. Only the patch documents of overrides stay JSON
//! text, as they are by definition (RFC 6902 and RFC 7386 patches are JSON
//! documents, as Kubernetes carries them in a `RawExtension`). Protocol
//! version 12.

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::slice::KeyedEntryError;
use crate::{LabelSelector, SliceEntry};

use super::KEY_PREFIX;

/// A placement's entry body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementBody {
    /// The Placement's namespace.
    pub namespace: String,
    /// The Placement's name.
    pub name: String,
    /// `spec.adopt`: agents may take over objects that exist on their
    /// cluster without relaymesh's marks (each applies its own policy first).
    pub adopt: bool,
    /// What of `spec.rollout` each cluster measures itself.
    pub timing: RolloutTiming,
    /// `spec.customization`.
    pub customization: Customization,
    /// `spec.statusRules`, checked at the root.
    pub status_rules: Vec<StatusRule>,
    /// `spec.statusGroupBy`.
    pub status_group_by: Vec<String>,
}

/// The times of a rollout each cluster measures for itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutTiming {
    /// `minSuccessTime`, in milliseconds.
    pub min_success_ms: u64,
    /// `progressDeadline`, in milliseconds; `None`: no deadline.
    pub progress_deadline_ms: Option<u64>,
}

/// `spec.customization`: templates and overrides, as the root checked them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Customization {
    /// Whether `{{ cluster.… }}` templates are expanded.
    pub templates: bool,
    /// Applied in order, after the templates.
    pub overrides: Vec<Override>,
}

impl Default for Customization {
    fn default() -> Self {
        Self {
            templates: true,
            overrides: Vec::new(),
        }
    }
}

/// One override: which clusters, which objects, what patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    /// The clusters it applies to; `None` for all.
    pub clusters: Option<LabelSelector>,
    /// The objects' API group (`""` for the core group), if named.
    pub api_group: Option<String>,
    /// The objects' kind, if named.
    pub kind: Option<String>,
    /// The objects' names (any of them; empty: every name).
    pub names: Vec<String>,
    /// The change.
    pub patch: Patch,
}

/// A patch document, as JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Patch {
    /// RFC 6902 operations.
    Json(String),
    /// An RFC 7386 merge patch.
    Merge(String),
}

/// One status rule of `spec.statusRules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRule {
    /// The rule's name.
    pub name: String,
    /// The CEL expression whose number is aggregated.
    pub select: Option<String>,
    /// The CEL expression an object must make `true` to count.
    pub filter: Option<String>,
    /// How the values combine, by its name in the spec (`count`, `sum`, …).
    pub aggregate: String,
    /// The cluster label the values are also summarized by.
    pub group_by: Option<String>,
    /// How many values `topk` shows.
    pub limit: u32,
}

impl PlacementBody {
    /// The entry key of this placement: `placement/NAMESPACE/NAME`.
    pub fn key(&self) -> String {
        format!("{KEY_PREFIX}{}/{}", self.namespace, self.name)
    }

    /// The body's bytes in a slice entry.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        codec::encode(self)
    }

    /// The body a placement entry carries: `None` if the entry is not a
    /// placement's, an error if its body does not decode or names another
    /// placement.
    pub fn from_entry(entry: &SliceEntry) -> Option<Result<Self, KeyedEntryError>> {
        crate::slice::decode_keyed(entry, "placement", KEY_PREFIX, Self::key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PlacementTarget, Target};
    use proptest::prelude::*;

    fn entry(body: &PlacementBody) -> SliceEntry {
        SliceEntry {
            key: body.key(),
            target: Target::Placement(PlacementTarget::default()),
            bundles: Vec::new(),
            body: body.encode().expect("encodes"),
            serial: 1,
            signature: Vec::new(),
        }
    }

    proptest! {
        #[test]
        fn every_body_survives_its_entry(
            name in "[a-z][a-z0-9-]{0,20}",
            adopt in any::<bool>(),
            min_success_ms in any::<u64>(),
            deadline in proptest::option::of(any::<u64>()),
            templates in any::<bool>(),
            merge in "\\{\"[a-z]{1,6}\":[0-9]{1,4}\\}",
            names in proptest::collection::vec("[a-z]{1,8}", 0..3),
            rule in proptest::option::of(("[a-z]{1,8}", ".{0,20}", 0u32..100)),
            group_by in proptest::collection::vec("[a-z./]{1,12}", 0..3),
        ) {
            let body = PlacementBody {
                namespace: "default".into(),
                name,
                adopt,
                timing: RolloutTiming { min_success_ms, progress_deadline_ms: deadline },
                customization: Customization {
                    templates,
                    overrides: vec![Override {
                        clusters: None,
                        api_group: Some("apps".into()),
                        kind: None,
                        names,
                        patch: Patch::Merge(merge),
                    }],
                },
                status_rules: rule.into_iter().map(|(name, select, limit)| StatusRule {
                    name,
                    select: Some(select),
                    filter: None,
                    aggregate: "sum".into(),
                    group_by: None,
                    limit,
                }).collect(),
                status_group_by: group_by,
            };
            let read = PlacementBody::from_entry(&entry(&body)).expect("a placement").expect("decodes");
            prop_assert_eq!(read, body);
        }
    }

    #[test]
    fn a_body_under_another_key_or_not_a_body_is_an_error() {
        let body = PlacementBody {
            namespace: "default".into(),
            name: "web".into(),
            ..PlacementBody::default()
        };
        let mut moved = entry(&body);
        moved.key = "placement/default/db".into();
        assert!(matches!(
            PlacementBody::from_entry(&moved),
            Some(Err(KeyedEntryError::KeyMismatch { .. }))
        ));
        let mut json = entry(&body);
        json.body = br#"{"spec":{"adopt":true}}"#.to_vec();
        assert!(matches!(
            PlacementBody::from_entry(&json),
            Some(Err(KeyedEntryError::Body { .. }))
        ));
        let mut other = entry(&body);
        other.key = "labels/edge-1".into();
        assert!(PlacementBody::from_entry(&other).is_none());
    }
}
