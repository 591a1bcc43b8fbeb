//! A change of one cluster's labels and annotations at the root (`relayctl
//! label|annotate cluster`, cordons and drains), and how it adds to what
//! the root changed on that cluster before: the one rule, used by the
//! root's API and by its loop when it signs the result (see
//! [`relaymesh_protocol::cluster_labels`]).

use std::collections::BTreeMap;

use relaymesh_protocol::ClusterLabels;

/// The most bytes a cluster's annotations may take, keys and values: they
/// travel to the cluster in one slice entry (Kubernetes allows 256 KiB on
/// an object; a cluster's annotations are for templates, not payloads).
pub const MAX_ANNOTATION_BYTES: usize = 64 * 1024;

/// What a `ClusterLabels` request asks to change on one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelChange {
    /// The cluster, with the labels to set and remove.
    pub labels: ClusterLabels,
    /// Annotations to set.
    pub annotate: BTreeMap<String, String>,
    /// Annotations to remove.
    pub unannotate: Vec<String>,
}

impl From<ClusterLabels> for LabelChange {
    fn from(labels: ClusterLabels) -> Self {
        Self {
            labels,
            ..Self::default()
        }
    }
}

/// The cluster's annotations would outgrow [`MAX_ANNOTATION_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Too long: the cluster's annotations would take {bytes} bytes, more than the {MAX_ANNOTATION_BYTES} allowed")]
pub struct AnnotationsTooLong {
    /// How many bytes they would take.
    pub bytes: usize,
}

/// `change` added to what the root changed before (`held`): a key set now
/// is no longer removed, and the other way round; annotations set and
/// removed. Refused if the annotations would outgrow
/// [`MAX_ANNOTATION_BYTES`].
pub fn merge(
    held: Option<ClusterLabels>,
    change: LabelChange,
) -> Result<ClusterLabels, AnnotationsTooLong> {
    let LabelChange {
        labels: change,
        annotate,
        unannotate,
    } = change;
    let mut merged = held.unwrap_or_else(|| ClusterLabels {
        node: change.node.clone(),
        ..ClusterLabels::default()
    });
    for key in &change.remove {
        merged.set.remove(key);
        if !merged.remove.contains(key) {
            merged.remove.push(key.clone());
        }
    }
    for (key, value) in change.set {
        merged.remove.retain(|removed| *removed != key);
        merged.set.insert(key, value);
    }
    merged.remove.sort();
    for key in &unannotate {
        merged.annotations.remove(key);
    }
    merged.annotations.extend(annotate);
    let bytes: usize = merged
        .annotations
        .iter()
        .map(|(key, value)| key.len() + value.len())
        .sum();
    if bytes > MAX_ANNOTATION_BYTES {
        return Err(AnnotationsTooLong { bytes });
    }
    Ok(merged)
}
