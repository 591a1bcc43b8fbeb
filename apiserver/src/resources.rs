//! The resource registry: which group/version/resources the API serves, with
//! their kind, scope, short names and verbs. Built-in kinds are a fixed table;
//! CustomResourceDefinitions in the object store add theirs, and stop adding
//! them when deleted (as kcp and kube-apiserver's apiextensions do).
//!
//! The registry is rebuilt from the store per request: CRDs are few and this
//! keeps it always in step without a cache to invalidate.

use std::fmt;
use std::sync::{Arc, LazyLock};

use serde_json::{json, Value};

use super::builtins::BUILTIN_KINDS;
use super::ApiError;
use crate::objects::{ObjectKey, ObjectStore};

/// The group of CustomResourceDefinitions.
pub(super) const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The plural resource of CustomResourceDefinitions.
pub(super) const CRD_RESOURCE: &str = "customresourcedefinitions";
/// Where a resource's objects come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The object store (full CRUD).
    Stored,
    /// The extension, as a read-only view ([`crate::Extension::objects`]).
    View,
}

/// An extension's check of an object of one of its kinds, run after the
/// API's own checks and before the object is stored: given the request's
/// namespace and the object, `Err` refuses the write (usually
/// [`ApiError::Invalid`]).
#[derive(Clone)]
pub struct Validator(Arc<Check>);

/// What a [`Validator`] calls.
type Check = dyn Fn(Option<&str>, &Value) -> Result<(), ApiError> + Send + Sync;

impl Validator {
    /// A validator calling `check`.
    pub fn new(
        check: impl Fn(Option<&str>, &Value) -> Result<(), ApiError> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(check))
    }

    /// Runs the check.
    pub(super) fn check(&self, namespace: Option<&str>, object: &Value) -> Result<(), ApiError> {
        (self.0)(namespace, object)
    }
}

/// An extension's advice on an object of one of its kinds that it
/// accepts: given the request's namespace and the object, the messages
/// sent back as `Warning` headers (kubectl prints each as `Warning: …`),
/// such as a name that refers to nothing known yet.
#[derive(Clone)]
pub struct Warner(Arc<Advise>);

/// What a [`Warner`] calls.
type Advise = dyn Fn(Option<&str>, &Value) -> Vec<String> + Send + Sync;

impl Warner {
    /// A warner calling `advise`.
    pub fn new(
        advise: impl Fn(Option<&str>, &Value) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(advise))
    }

    /// The warnings for `object`.
    pub(super) fn warnings(&self, namespace: Option<&str>, object: &Value) -> Vec<String> {
        (self.0)(namespace, object)
    }
}

impl fmt::Debug for Warner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Warner")
    }
}

impl PartialEq for Warner {
    // The same advice, not an equal one: closures cannot be compared.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Validator")
    }
}

impl PartialEq for Validator {
    // The same check, not an equal one: closures cannot be compared.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// One served resource in one group-version: a built-in kind, a CRD's
/// served version, or an extension's kind ([`Resource::new`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The API group; empty for the core group.
    pub(super) group: String,
    /// The version, as `v1`.
    pub(super) version: String,
    /// The plural resource name.
    pub(super) plural: String,
    /// The singular resource name.
    pub(super) singular: String,
    /// The kind.
    pub(super) kind: String,
    /// Namespaced or cluster-scoped.
    pub(super) namespaced: bool,
    /// kubectl's abbreviations.
    pub(super) short_names: Vec<String>,
    /// Where the objects come from.
    pub(super) source: Source,
    /// Built into Kubernetes (strategic merge patch applies), or custom.
    pub(super) builtin: bool,
    /// Whether the kind has a `status` subresource: built-ins whose type
    /// has a status, CRD versions that declare one, Placements.
    pub(super) status: bool,
    /// The OpenAPI v3 schema of custom kinds, from their CRD or their
    /// extension ([`Resource::schema`]): what `/openapi` serves and what
    /// unknown fields are checked against.
    pub(super) schema: Option<Value>,
    /// Extra printer columns of custom kinds, from their CRD or their
    /// extension, as `additionalPrinterColumns` entries.
    pub(super) printer_columns: Vec<Value>,
    /// Categories beside upstream's (a CRD's `spec.names.categories`, an
    /// extension's choice).
    pub(super) extra_categories: Vec<String>,
    /// The extension's check of objects of its kind.
    pub(super) validator: Option<Validator>,
    /// The extension's warnings on objects of its kind it accepts.
    pub(super) warner: Option<Warner>,
}

impl Resource {
    /// An extension's stored kind `kind` (plural `plural`) in
    /// `group/version`, with full CRUD, a `status` subresource and no
    /// schema (any fields are accepted); the builder methods below change
    /// that.
    pub fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            singular: kind.to_lowercase(),
            kind: kind.to_string(),
            namespaced,
            short_names: Vec::new(),
            source: Source::Stored,
            builtin: false,
            status: true,
            schema: None,
            printer_columns: Vec::new(),
            extra_categories: Vec::new(),
            validator: None,
            warner: None,
        }
    }

    /// The same kind as a read-only view: `get`, `list` and `watch` only,
    /// its objects made by [`crate::Extension::objects`].
    #[must_use]
    pub fn read_only(mut self) -> Self {
        self.source = Source::View;
        self.status = false;
        self
    }

    /// With kubectl's abbreviations.
    #[must_use]
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|name| name.to_string()).collect();
        self
    }

    /// In the categories `categories` (`all` puts it in `kubectl get all`).
    #[must_use]
    pub fn categories_also(mut self, categories: &[&str]) -> Self {
        self.extra_categories = categories.iter().map(|name| name.to_string()).collect();
        self
    }

    /// With table columns between Name and Age, as a CRD's
    /// `additionalPrinterColumns` (`name`, `type`, `jsonPath`).
    #[must_use]
    pub fn printer_columns(mut self, columns: Vec<Value>) -> Self {
        self.printer_columns = columns;
        self
    }

    /// With `validator` checking every object written.
    #[must_use]
    pub fn validator(mut self, validator: Validator) -> Self {
        self.validator = Some(validator);
        self
    }

    /// With `warner` advising on every object written to the main
    /// resource (not its `status`) and accepted.
    #[must_use]
    pub fn warner(mut self, warner: Warner) -> Self {
        self.warner = Some(warner);
        self
    }

    /// With `schema`, a structural OpenAPI v3 schema of the whole object
    /// as a CRD's `openAPIV3Schema` gives it (`apiVersion`, `kind` and
    /// `metadata` may be left out): `/openapi/v2` and `/openapi/v3` serve
    /// it, so `kubectl explain` explains the kind, and `fieldValidation`
    /// checks unknown fields and JSON types against it.
    #[must_use]
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Whether this is a read-only view ([`Resource::read_only`]).
    pub fn is_view(&self) -> bool {
        self.source == Source::View
    }

    /// The plural resource name.
    pub fn plural(&self) -> &str {
        &self.plural
    }

    /// The API group; empty for the core group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The version, as `v1`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The kind, as `Deployment`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Whether objects of the kind live in a namespace.
    pub fn is_namespaced(&self) -> bool {
        self.namespaced
    }

    /// Whether this is a built-in Kubernetes kind rather than a custom one.
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// `group/version`, or `version` for the core group.
    pub(super) fn api_version(&self) -> String {
        api_version(&self.group, &self.version)
    }

    /// `plural.group`, or `plural` for the core group, as messages name it.
    pub(super) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The verbs discovery advertises.
    pub(super) fn verbs(&self) -> Vec<&'static str> {
        if self.source != Source::Stored {
            return vec!["get", "list", "watch"];
        }
        let mut verbs = vec!["create", "delete"];
        if self.has_delete_collection() {
            verbs.push("deletecollection");
        }
        verbs.extend(["get", "list", "patch", "update", "watch"]);
        verbs
    }

    /// Whether `DELETE` on the collection deletes what it selects: for every
    /// stored resource but Namespaces, as in kube-apiserver.
    pub(super) fn has_delete_collection(&self) -> bool {
        self.source == Source::Stored && !(self.group.is_empty() && self.plural == "namespaces")
    }

    /// Whether the objects can be written.
    pub(super) fn is_writable(&self) -> bool {
        self.source == Source::Stored
    }

    /// The store key of the object `name` in `namespace`.
    pub(super) fn key(&self, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey::new(&self.group, &self.plural, namespace, name)
    }

    /// The NotFound error for the object `name`.
    pub(super) fn not_found(&self, name: &str) -> ApiError {
        ApiError::NotFound(format!("{} {name:?} not found", self.qualified()))
    }

    /// The categories the resource is in: `all` and `api-extensions` for
    /// upstream's members, and what a CRD or extension adds.
    pub(super) fn categories(&self) -> Vec<&str> {
        let member = |list: &[(&str, &str)]| {
            list.iter()
                .any(|(group, plural)| *group == self.group && *plural == self.plural)
        };
        let mut categories = Vec::new();
        if member(ALL_CATEGORY) {
            categories.push("all");
        }
        if member(API_EXTENSIONS_CATEGORY) {
            categories.push("api-extensions");
        }
        for category in &self.extra_categories {
            if !categories.contains(&category.as_str()) {
                categories.push(category);
            }
        }
        categories
    }

    /// The APIResource entry of discovery.
    pub(super) fn discovery(&self) -> Value {
        json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": self.verbs(),
            "shortNames": self.short_names,
            "categories": self.categories(),
            "storageVersionHash": "",
        })
    }
}

/// `group/version`, or `version` for the core group.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Every served resource.
#[derive(Debug, Clone)]
pub(super) struct Registry {
    resources: Vec<Resource>,
}

/// The built-in members of the `all` category, as (group, plural):
/// kube-apiserver's (pods, replicationcontrollers, services, daemonsets,
/// deployments, replicasets, statefulsets, horizontalpodautoscalers,
/// cronjobs, jobs).
const ALL_CATEGORY: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "replicationcontrollers"),
    ("", "services"),
    ("apps", "daemonsets"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
];

/// The members of upstream's `api-extensions` category, as (group, plural):
/// what extends the API server (`kubectl get api-extensions`).
const API_EXTENSIONS_CATEGORY: &[(&str, &str)] = &[
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("apiregistration.k8s.io", "apiservices"),
];

/// The built-ins as served resources, made once: whether a kind has a
/// status is read off its schema, which is too slow to do per request.
static BUILTIN_RESOURCES: LazyLock<Vec<Resource>> = LazyLock::new(|| {
    BUILTIN_KINDS
        .iter()
        .map(|builtin| Resource {
            group: builtin.group.to_string(),
            version: builtin.version.to_string(),
            plural: builtin.plural.to_string(),
            singular: builtin.kind.to_lowercase(),
            kind: builtin.kind.to_string(),
            namespaced: builtin.namespaced,
            short_names: builtin
                .short_names
                .iter()
                .map(|name| name.to_string())
                .collect(),
            source: Source::Stored,
            builtin: true,
            status: builtin.has_status(),
            schema: None,
            printer_columns: Vec::new(),
            extra_categories: Vec::new(),
            validator: None,
            warner: None,
        })
        .collect()
});

impl Registry {
    /// The built-ins, `extension`'s kinds, and the served versions of every
    /// CRD in `store`.
    pub(super) fn load(store: &ObjectStore, extension: &[Resource]) -> Result<Self, ApiError> {
        let Self { mut resources } = Self::without_definitions(extension);
        let (definitions, _) = store
            .list(CRD_GROUP, CRD_RESOURCE, None)
            .map_err(|error| ApiError::Internal(format!("cannot list CRDs: {error}")))?;
        for definition in &definitions {
            for resource in from_definition(definition) {
                let taken = resources.iter().any(|known| {
                    known.group == resource.group
                        && known.version == resource.version
                        && known.plural == resource.plural
                });
                if taken {
                    tracing::debug!(group = %resource.group, plural = %resource.plural, "a CRD shadows a served resource; ignored");
                } else {
                    resources.push(resource);
                }
            }
        }
        Ok(Self { resources })
    }

    /// The built-ins and `extension`'s kinds: what is served before any CRD
    /// is stored.
    pub(super) fn without_definitions(extension: &[Resource]) -> Self {
        let mut resources = BUILTIN_RESOURCES.clone();
        for resource in extension {
            let taken = resources.iter().any(|known| {
                known.group == resource.group
                    && known.version == resource.version
                    && known.plural == resource.plural
            });
            if taken {
                tracing::warn!(group = %resource.group, plural = %resource.plural, "an extension's kind shadows a built-in; ignored");
            } else {
                resources.push(resource.clone());
            }
        }
        Self { resources }
    }

    /// Exactly `resources`, for documents about a set the caller keeps
    /// (see [`crate::served`]).
    pub(super) fn from_resources(resources: Vec<Resource>) -> Self {
        Self { resources }
    }

    /// Every resource.
    pub(super) fn all(&self) -> &[Resource] {
        &self.resources
    }

    /// The resource `plural` of `group/version`.
    pub(super) fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Resource> {
        self.resources.iter().find(|resource| {
            resource.group == group && resource.version == version && resource.plural == plural
        })
    }

    /// The resources of one group-version.
    pub(super) fn of(&self, group: &str, version: &str) -> Vec<&Resource> {
        self.resources
            .iter()
            .filter(|resource| resource.group == group && resource.version == version)
            .collect()
    }

    /// The served groups (not the core group), each with its versions, in
    /// order of first appearance.
    pub(super) fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for resource in self.resources.iter().filter(|r| !r.group.is_empty()) {
            match groups
                .iter_mut()
                .find(|(group, _)| *group == resource.group)
            {
                Some((_, versions)) => {
                    if !versions.contains(&resource.version) {
                        versions.push(resource.version.clone());
                    }
                }
                None => groups.push((resource.group.clone(), vec![resource.version.clone()])),
            }
        }
        groups
    }
}

/// The resources a CRD serves: one per served version.
pub(super) fn from_definition(definition: &Value) -> Vec<Resource> {
    let spec = &definition["spec"];
    let (Some(group), Some(plural), Some(kind)) = (
        spec["group"].as_str(),
        spec["names"]["plural"].as_str(),
        spec["names"]["kind"].as_str(),
    ) else {
        return Vec::new();
    };
    let singular = spec["names"]["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let short_names = string_list(&spec["names"]["shortNames"]);
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let categories = string_list(&spec["names"]["categories"]);
    spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|version| version["served"].as_bool().unwrap_or(true))
        .filter_map(|version| {
            Some(Resource {
                group: group.to_string(),
                version: version["name"].as_str()?.to_string(),
                plural: plural.to_string(),
                singular: singular.clone(),
                kind: kind.to_string(),
                namespaced,
                short_names: short_names.clone(),
                source: Source::Stored,
                builtin: false,
                status: version.pointer("/subresources/status").is_some(),
                schema: version.pointer("/schema/openAPIV3Schema").cloned(),
                printer_columns: version["additionalPrinterColumns"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                extra_categories: categories.clone(),
                validator: None,
                warner: None,
            })
        })
        .collect()
}

/// The strings of a JSON list; nothing for anything else.
fn string_list(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The built-in kind `plural` of `group`, for tests.
#[cfg(test)]
pub(crate) fn builtin(group: &str, plural: &str) -> Resource {
    BUILTIN_RESOURCES
        .iter()
        .find(|resource| resource.group == group && resource.plural == plural)
        .cloned()
        .expect("a built-in kind")
}

/// Kinds like relaymesh's, for tests: a stored namespaced kind in the
/// `all` category and a read-only view.
#[cfg(test)]
pub(crate) fn example_extension() -> Vec<Resource> {
    vec![
        Resource::new("relaymesh.dev", "v1alpha1", "placements", "Placement", true)
            .short_names(&["pl"])
            .categories_also(&["all"]),
        Resource::new("relaymesh.dev", "v1alpha1", "clusters", "Cluster", false).read_only(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Cluster",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v0", "served": false, "storage": false},
                ],
            },
        })
    }

    #[test]
    fn crds_add_served_versions() {
        let resources = from_definition(&crd());
        assert_eq!(resources.len(), 1);
        let widget = &resources[0];
        assert_eq!(widget.api_version(), "example.com/v1");
        assert!(!widget.namespaced);
        assert_eq!(widget.short_names, ["wg"]);
        assert_eq!(widget.schema, Some(json!({"type": "object"})));
        assert!(from_definition(&json!({"spec": {}})).is_empty());
    }

    #[test]
    fn builtins_and_own_kinds() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let store = ObjectStore::open(db.open_tree("o").expect("a tree")).expect("opens");
        let registry =
            Registry::load(&store, &crate::resources::example_extension()).expect("loads");
        let deployments = registry.find("apps", "v1", "deployments").expect("served");
        assert_eq!(deployments.short_names, ["deploy"]);
        assert!(deployments.namespaced && deployments.builtin);
        let clusters = registry
            .find("relaymesh.dev", "v1alpha1", "clusters")
            .expect("served");
        assert_eq!(clusters.verbs(), ["get", "list", "watch"]);
        assert_eq!(
            registry.find("", "v1", "pods").expect("served").short_names,
            ["po"]
        );
        assert!(registry.find("", "v1", "bindings").is_none());
        let in_all: Vec<String> = registry
            .all()
            .iter()
            .filter(|resource| resource.categories() == ["all"])
            .map(|resource| resource.qualified())
            .collect();
        assert_eq!(
            in_all,
            [
                "pods",
                "replicationcontrollers",
                "services",
                "daemonsets.apps",
                "deployments.apps",
                "replicasets.apps",
                "statefulsets.apps",
                "horizontalpodautoscalers.autoscaling",
                "cronjobs.batch",
                "jobs.batch",
                "placements.relaymesh.dev",
            ]
        );
        let groups = registry.groups();
        assert!(groups.contains(&("autoscaling".to_string(), vec!["v2".to_string()])));
        let key = ObjectKey::new(CRD_GROUP, CRD_RESOURCE, None, "widgets.example.com");
        store.create(&key, crd()).expect("creates");
        let registry =
            Registry::load(&store, &crate::resources::example_extension()).expect("loads");
        assert!(registry.find("example.com", "v1", "widgets").is_some());
        assert_eq!(registry.of("example.com", "v1").len(), 1);
    }
}
