//! What every hollow cluster serves alike, built once per process and shared
//! through an `Arc`: the built-in kinds, the `/version` and discovery
//! documents (already serialized, so answering one costs a reference count),
//! and the namespaces a cluster has from the start.
//!
//! The kinds and documents come from the API server crate
//! ([`relaymesh_apiserver::served`]), so a hollow cluster advertises exactly
//! what a simulated one does. A cluster's own CustomResourceDefinitions add
//! kinds on that cluster only; [`Discovery::groups_with`] and
//! [`Discovery::resource_list_with`] build the documents that include them.

use std::collections::HashMap;

use bytes::Bytes;
use relaymesh_apiserver::objects::{ObjectKey, INITIAL_NAMESPACES};
use relaymesh_apiserver::{api_version, served, Resource};
use serde_json::json;

use super::encoding::{timestamp, to_bytes};

/// Namespaces a hollow cluster has from the start, as a simulated cluster
/// has them (the API server's own three, plus `kube-node-lease`).
const EXTRA_NAMESPACES: [&str; 1] = ["kube-node-lease"];

/// The built-in kinds and their documents, shared by every hollow cluster.
#[derive(Debug)]
pub struct Discovery {
    builtin: Vec<Resource>,
    version: Bytes,
    core_versions: Bytes,
    groups: Bytes,
    /// `/apis/{group}` by group.
    group_documents: HashMap<String, Bytes>,
    /// `/api/v1` and `/apis/{group}/{version}` by `apiVersion` (`v1`,
    /// `apps/v1`).
    resource_lists: HashMap<String, Bytes>,
    /// The namespaces every cluster starts with, serialized once: their
    /// bytes are shared by every cluster (they have the same uid
    /// everywhere, which nothing in a hollow cluster cares about).
    initial_namespaces: Vec<(ObjectKey, Bytes)>,
}

impl Discovery {
    /// The built-in kinds of the Kubernetes version the API server reports.
    pub fn builtin() -> Self {
        let builtin = served::builtin_resources();
        let mut group_documents = HashMap::new();
        let mut resource_lists = HashMap::new();
        for resource in &builtin {
            let group = resource.group();
            let version = resource.version();
            let key = api_version(group, version);
            if resource_lists.contains_key(&key) {
                continue;
            }
            if let Some(list) = served::resource_list_document(&builtin, group, version) {
                resource_lists.insert(key, to_bytes(&list));
            }
            if !group.is_empty() && !group_documents.contains_key(group) {
                if let Some(document) = served::group_document(&builtin, group) {
                    group_documents.insert(group.to_string(), to_bytes(&document));
                }
            }
        }
        let initial_namespaces = INITIAL_NAMESPACES
            .iter()
            .chain(EXTRA_NAMESPACES.iter())
            .enumerate()
            .map(|(index, name)| {
                let object = json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": name,
                        "uid": relaymesh_apiserver::objects::new_uid(),
                        "resourceVersion": (index + 1).to_string(),
                        "creationTimestamp": timestamp(),
                        "generation": 1,
                        "labels": {"kubernetes.io/metadata.name": name},
                    },
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                });
                (
                    ObjectKey::new("", "namespaces", None, name),
                    to_bytes(&object),
                )
            })
            .collect();
        Self {
            version: to_bytes(&served::version_document()),
            core_versions: to_bytes(&served::core_versions_document()),
            groups: to_bytes(&served::group_list_document(&builtin)),
            group_documents,
            resource_lists,
            initial_namespaces,
            builtin,
        }
    }

    /// The built-in kind `plural` of `group/version`.
    pub(super) fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Resource> {
        self.builtin.iter().find(|resource| {
            resource.group() == group
                && resource.version() == version
                && resource.plural() == plural
        })
    }

    /// The built-in kinds.
    pub(super) fn builtin_resources(&self) -> &[Resource] {
        &self.builtin
    }

    /// `/version`.
    pub(super) fn version(&self) -> Bytes {
        self.version.clone()
    }

    /// `/api`.
    pub(super) fn core_versions(&self) -> Bytes {
        self.core_versions.clone()
    }

    /// `/apis` with the kinds of `custom` too (made anew: only clusters with
    /// CRDs pay for it).
    pub(super) fn groups_with(&self, custom: &[Resource]) -> Bytes {
        if custom.is_empty() {
            return self.groups.clone();
        }
        to_bytes(&served::group_list_document(&self.with(custom)))
    }

    /// `/apis/{group}`, with the kinds of `custom` too.
    pub(super) fn group_with(&self, custom: &[Resource], group: &str) -> Option<Bytes> {
        if !custom.iter().any(|resource| resource.group() == group) {
            return self.group_documents.get(group).cloned();
        }
        served::group_document(&self.with(custom), group).map(|document| to_bytes(&document))
    }

    /// `/api/v1` or `/apis/{group}/{version}`, with the kinds of `custom` too.
    pub(super) fn resource_list_with(
        &self,
        custom: &[Resource],
        group: &str,
        version: &str,
    ) -> Option<Bytes> {
        let touched = custom
            .iter()
            .any(|resource| resource.group() == group && resource.version() == version);
        if !touched {
            return self
                .resource_lists
                .get(&api_version(group, version))
                .cloned();
        }
        served::resource_list_document(&self.with(custom), group, version)
            .map(|document| to_bytes(&document))
    }

    /// The namespaces every cluster starts with.
    pub(super) fn initial_namespaces(&self) -> &[(ObjectKey, Bytes)] {
        &self.initial_namespaces
    }

    /// The built-ins and `custom`, a custom kind never shadowing a built-in.
    fn with(&self, custom: &[Resource]) -> Vec<Resource> {
        let mut all = self.builtin.clone();
        for resource in custom {
            if self
                .find(resource.group(), resource.version(), resource.plural())
                .is_none()
            {
                all.push(resource.clone());
            }
        }
        all
    }
}
