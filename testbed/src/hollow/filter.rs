//! What a list or a watch on a hollow cluster selects: a kind, a namespace
//! (or all), and label and field selectors.
//!
//! Kept apart from the watches themselves because the store holds a filter
//! for every running watch, to hand each write only to the watches it
//! concerns.

use bytes::Bytes;
use relaymesh_apiserver::objects::ObjectKey;
use relaymesh_apiserver::query::Query;
use relaymesh_apiserver::selector::{FieldSelector, LabelSelector};
use relaymesh_apiserver::{ApiError, Resource};
use serde_json::Value;

/// What a watch (or a list) selects.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    group: String,
    plural: String,
    /// `None`: every namespace.
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    /// Neither selector says anything, so objects need not be parsed.
    everything: bool,
}

impl Filter {
    /// The filter a list or watch of `resource` in `namespace` asks for.
    pub(super) fn new(
        resource: &Resource,
        namespace: Option<&str>,
        query: &Query,
    ) -> Result<Self, ApiError> {
        let labels = query.get("labelSelector").unwrap_or_default();
        let fields = query.get("fieldSelector").unwrap_or_default();
        let bad = |error: relaymesh_apiserver::selector::SelectorError| {
            ApiError::BadRequest(error.to_string())
        };
        Ok(Self {
            group: resource.group().to_string(),
            plural: resource.plural().to_string(),
            namespace: namespace
                .filter(|_| resource.is_namespaced())
                .map(str::to_string),
            everything: labels.trim().is_empty() && fields.trim().is_empty(),
            labels: LabelSelector::parse(labels).map_err(bad)?,
            fields: FieldSelector::parse_for(fields, resource.group(), resource.plural())
                .map_err(bad)?,
        })
    }

    /// Whether the kind and namespace of `key` are selected.
    pub(super) fn covers(&self, key: &ObjectKey) -> bool {
        key.group == self.group
            && key.resource == self.plural
            && (self.namespace.is_none() || key.namespace == self.namespace)
    }

    /// Whether `object`, stored as `key`, is selected; `object` is parsed
    /// from `bytes` only if a selector needs it.
    pub(super) fn selects(&self, key: &ObjectKey, object: Option<&Value>, bytes: &Bytes) -> bool {
        if !self.covers(key) {
            return false;
        }
        if self.everything {
            return true;
        }
        let parsed;
        let object = match object {
            Some(object) => object,
            None => {
                parsed = serde_json::from_slice::<Value>(bytes).unwrap_or_default();
                &parsed
            }
        };
        self.labels.matches_object(object) && self.fields.matches_object(object)
    }
}
