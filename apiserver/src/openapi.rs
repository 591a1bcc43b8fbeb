//! OpenAPI documents, as kube-apiserver serves them: `/openapi/v2` (one
//! Swagger 2.0 document) and `/openapi/v3` (an index of group-versions, and
//! per group-version a document). PATCH operations carry
//! `x-kubernetes-group-version-kind` and a `fieldValidation` parameter
//! (kubectl checks that to decide whether the server validates fields, and
//! validates nothing itself when it does); kind schemas carry
//! `x-kubernetes-group-version-kind` (what `kubectl explain` looks kinds up
//! by).
//!
//! Schemas: built-in kinds' come from their `k8s-openapi` types (the
//! `builtins` module), with the list merge strategies of the server's own
//! strategic merge patch table written in as `x-kubernetes-patch-*` and
//! `x-kubernetes-list-*` extensions, so that what kubectl computes on the
//! client merges the way the server applies it. Custom kinds' come from their
//! CRD, an extension's kinds' from the schema it gives them
//! ([`crate::Resource::schema`]); a kind with neither is an open object.
//! No IO.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::generate::SchemaSettings;
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};

use super::builtins;
use super::patch::merge_keys::{ListStrategy, Schema as MergeSchema};
use super::resources::{Registry, Resource};

/// The version the documents' `info` reports.
const INFO_VERSION: &str = "v1.33.0";

/// Where v3 documents keep their schemas, and v2's.
const V3_REFS: &str = "#/components/schemas/";
const V2_REFS: &str = "#/definitions/";

/// The schema of a CRD's JSON values (`default`, `example`, `enum`).
const ANY_JSON: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON";

/// The schema of ObjectMeta, by its OpenAPI name.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// `/openapi/v3`: the group-versions and where their documents are.
pub(super) fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for resource in registry.all() {
        let path = document_path(&resource.group, &resource.version);
        if paths.contains_key(&path) {
            continue;
        }
        let hash = document(registry, &path)
            .map(|doc| hash_of(&doc))
            .unwrap_or_default();
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// The v3 document of `path` (`api/v1` or `apis/{group}/{version}`).
pub(super) fn document(registry: &Registry, path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", version] => (String::new(), version.to_string()),
        ["apis", group, version] => (group.to_string(), version.to_string()),
        _ => return None,
    };
    let resources = registry.of(&group, &version);
    if resources.is_empty() {
        return None;
    }
    let (paths, schemas) = paths_and_schemas(&resources, Style::V3);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": INFO_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v2`: every served resource in one Swagger 2.0 document.
pub(super) fn document_v2(registry: &Registry) -> Value {
    let resources: Vec<&Resource> = registry.all().iter().collect();
    let (paths, definitions) = paths_and_schemas(&resources, Style::V2);
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": INFO_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

/// Which OpenAPI the document is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    V2,
    V3,
}

impl Style {
    fn refs(self) -> &'static str {
        match self {
            Style::V2 => V2_REFS,
            Style::V3 => V3_REFS,
        }
    }

    fn reference(self, name: &str) -> Value {
        json!({"$ref": format!("{}{name}", self.refs())})
    }

    fn query(self, name: &str) -> Value {
        match self {
            Style::V2 => {
                json!({"name": name, "in": "query", "type": "string", "uniqueItems": true})
            }
            Style::V3 => {
                json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
            }
        }
    }

    fn ok(self, schema: Value) -> Value {
        match self {
            Style::V2 => json!({"200": {"description": "OK", "schema": schema}}),
            Style::V3 => json!({
                "200": {"description": "OK", "content": {"application/json": {"schema": schema}}}
            }),
        }
    }
}

/// The paths and schemas of `resources`.
fn paths_and_schemas(
    resources: &[&Resource],
    style: Style,
) -> (Map<String, Value>, Map<String, Value>) {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for (name, schema) in &BUILTIN_SCHEMAS.shared {
        schemas.insert(name.clone(), rewrite_refs(schema.clone(), style));
    }
    for resource in resources {
        let name = match builtins::find(&resource.group, &resource.version, &resource.kind) {
            Some(builtin) => {
                let name = (builtin.schema_name)().into_owned();
                let Some(referred) = BUILTIN_SCHEMAS.of_kind.get(&name) else {
                    continue;
                };
                for (name, schema) in referred {
                    schemas.insert(name.clone(), rewrite_refs(schema.clone(), style));
                }
                name
            }
            None => {
                let name = schema_name(resource);
                schemas.insert(name.clone(), custom_schema(resource, style));
                name
            }
        };
        insert_paths(&mut paths, resource, style.reference(&name), style);
    }
    (paths, schemas)
}

/// The item and collection paths of `resource`, with the operations it
/// answers.
fn insert_paths(paths: &mut Map<String, Value>, resource: &Resource, schema: Value, style: Style) {
    let gvk = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
    let prefix = if resource.group.is_empty() {
        format!("/api/{}", resource.version)
    } else {
        format!("/apis/{}/{}", resource.group, resource.version)
    };
    let scope = if resource.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let item = format!("{prefix}{scope}/{}/{{name}}", resource.plural);
    let collection = format!("{prefix}{scope}/{}", resource.plural);
    let response = style.ok(schema);
    let operation = |action: &str, parameters: Value| {
        json!({
            "operationId": format!("{action}{}", resource.kind),
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "parameters": parameters,
            "responses": response,
        })
    };
    let writes = json!([
        style.query("dryRun"),
        style.query("fieldManager"),
        style.query("fieldValidation"),
    ]);
    let mut item_operations = json!({"get": operation("get", json!([]))});
    let mut collection_operations = json!({"get": operation("list", json!([]))});
    if resource.is_writable() {
        item_operations["put"] = operation("replace", writes.clone());
        item_operations["patch"] = operation("patch", writes.clone());
        item_operations["delete"] = operation("delete", json!([]));
        collection_operations["post"] = operation("create", writes);
    }
    paths.insert(item, item_operations);
    paths.insert(collection, collection_operations);
}

/// The built-ins' schemas, made once: by kind, every schema the kind's
/// refers to (itself included), in v3 form; and ObjectMeta's, which custom
/// kinds refer to too.
struct BuiltinSchemas {
    of_kind: BTreeMap<String, BTreeMap<String, Value>>,
    shared: BTreeMap<String, Value>,
}

static BUILTIN_SCHEMAS: LazyLock<BuiltinSchemas> = LazyLock::new(|| {
    let settings = SchemaSettings::openapi3();
    let mut of_kind = BTreeMap::new();
    for builtin in builtins::BUILTIN_KINDS {
        let mut generator = SchemaGenerator::new(settings.clone());
        (builtin.schema)(&mut generator);
        let name = (builtin.schema_name)().into_owned();
        let mut referred: BTreeMap<String, Value> =
            generator.take_definitions(true).into_iter().collect();
        if let Some(schema) = referred.get_mut(&name) {
            schema["x-kubernetes-group-version-kind"] = json!([{
                "group": builtin.group, "version": builtin.version, "kind": builtin.kind,
            }]);
        }
        for (name, schema) in referred.iter_mut() {
            add_list_strategies(name, schema);
            if name == ANY_JSON {
                // Any JSON value, as upstream's document says by giving no
                // type; k8s-openapi's says "object", which a CRD's
                // `default: 1` is not.
                *schema = json!({
                    "description": schema.get("description").cloned().unwrap_or_default(),
                    "x-kubernetes-preserve-unknown-fields": true,
                });
            }
        }
        of_kind.insert(name, referred);
    }
    let mut generator = SchemaGenerator::new(settings);
    generator.subschema_for::<ObjectMeta>();
    let mut shared: BTreeMap<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    for (name, schema) in shared.iter_mut() {
        add_list_strategies(name, schema);
    }
    BuiltinSchemas { of_kind, shared }
});

/// The schema of a built-in `resource` and the schemas it refers to (by
/// name), in v3 form.
pub(super) fn builtin_schema(
    resource: &Resource,
) -> Option<(&'static Value, &'static BTreeMap<String, Value>)> {
    if !resource.builtin {
        return None;
    }
    let builtin = builtins::find(&resource.group, &resource.version, &resource.kind)?;
    let referred = BUILTIN_SCHEMAS.of_kind.get(&*(builtin.schema_name)())?;
    Some((referred.get(&*(builtin.schema_name)())?, referred))
}

/// Writes the strategic merge patch table's strategies for the lists of the
/// schema `name` into its properties.
fn add_list_strategies(name: &str, schema: &mut Value) {
    let node = match name {
        OBJECT_META => MergeSchema::ObjectMeta,
        "io.k8s.api.core.v1.PodSpec" => MergeSchema::PodSpec,
        "io.k8s.api.core.v1.Container" | "io.k8s.api.core.v1.EphemeralContainer" => {
            MergeSchema::Container
        }
        "io.k8s.api.core.v1.ServiceSpec" => MergeSchema::ServiceSpec,
        name if name.ends_with("Status") => MergeSchema::Status,
        _ => return,
    };
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (field, property) in properties.iter_mut() {
        if property.get("type") != Some(&json!("array")) {
            continue;
        }
        match node.list_strategy(field) {
            ListStrategy::Atomic => {}
            ListStrategy::Set => {
                property["x-kubernetes-patch-strategy"] = json!("merge");
                property["x-kubernetes-list-type"] = json!("set");
            }
            ListStrategy::Keyed { keys } => {
                property["x-kubernetes-patch-strategy"] = json!("merge");
                property["x-kubernetes-patch-merge-key"] = json!(keys[0]);
                property["x-kubernetes-list-type"] = json!("map");
                property["x-kubernetes-list-map-keys"] = json!(keys);
            }
        }
    }
}

/// `schema` with its references pointing where `style` keeps schemas.
fn rewrite_refs(schema: Value, style: Style) -> Value {
    match (style, schema) {
        (Style::V3, schema) => schema,
        (Style::V2, Value::Object(map)) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("$ref", Value::String(target)) => {
                            Value::String(target.replacen(V3_REFS, V2_REFS, 1))
                        }
                        (_, value) => rewrite_refs(value, style),
                    };
                    (key, value)
                })
                .collect(),
        ),
        (Style::V2, Value::Array(items)) => Value::Array(
            items
                .into_iter()
                .map(|item| rewrite_refs(item, style))
                .collect(),
        ),
        (Style::V2, other) => other,
    }
}

fn document_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash_of(document: &Value) -> String {
    let mut hasher = DefaultHasher::new();
    document.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// A custom kind's schema name, Kubernetes style: the group reversed, then
/// version and kind.
fn schema_name(resource: &Resource) -> String {
    let group = resource
        .group
        .split('.')
        .rev()
        .collect::<Vec<_>>()
        .join(".");
    format!("{group}.{}.{}", resource.version, resource.kind)
}

/// A custom kind's schema: its CRD's or its extension's, or an open
/// object, with the common fields and its group-version-kind.
fn custom_schema(resource: &Resource, style: Style) -> Value {
    let mut schema = resource
        .schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if schema.get("description").is_none() {
        schema["description"] = json!(format!(
            "{} ({}): no schema is known, so any fields are kept.",
            resource.kind,
            resource.api_version()
        ));
    }
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    let mut properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    properties.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
    properties.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
    properties.insert(
        "metadata".into(),
        json!({"allOf": [style.reference(OBJECT_META)], "description": "Standard object's metadata."}),
    );
    schema["properties"] = Value::Object(properties);
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": resource.group, "version": resource.version, "kind": resource.kind}]);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ObjectStore;

    fn registry() -> Registry {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let store = ObjectStore::open(db.open_tree("o").expect("a tree")).expect("opens");
        Registry::load(&store, &crate::resources::example_extension()).expect("loads")
    }

    /// Every `$ref` in `value`.
    fn references(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("$ref", Value::String(target)) => found.push(target.clone()),
                        _ => references(value, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| references(item, found)),
            _ => {}
        }
    }

    #[test]
    fn index_and_documents_have_kubectl_shape() {
        let registry = registry();
        let index = index(&registry);
        let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .expect("apps/v1");
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        assert!(index["paths"]["api/v1"].is_object());
        let apps = document(&registry, "apis/apps/v1").expect("a document");
        let patch =
            &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        let parameters = patch["parameters"].as_array().expect("parameters");
        assert!(parameters.iter().any(|p| p["name"] == "fieldValidation"));
        let schema = &apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            schema["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        assert!(document(&registry, "apis/nope/v1").is_none());
        assert!(document(&registry, "nonsense").is_none());
    }

    #[test]
    fn every_served_builtin_has_its_full_schema() {
        let registry = registry();
        let core = document(&registry, "api/v1").expect("core");
        let schemas = &core["components"]["schemas"];
        for kind in ["ResourceQuota", "LimitRange", "Pod", "ConfigMap", "Node"] {
            let schema = &schemas[format!("io.k8s.api.core.v1.{kind}")];
            assert_eq!(schema["x-kubernetes-group-version-kind"][0]["kind"], kind);
        }
        let hard = &schemas["io.k8s.api.core.v1.ResourceQuotaSpec"]["properties"]["hard"];
        assert_eq!(hard["type"], "object", "{hard}");
        let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        let tolerations = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["tolerations"];
        assert!(tolerations.get("x-kubernetes-patch-merge-key").is_none());
        let finalizers = &schemas[OBJECT_META]["properties"]["finalizers"];
        assert_eq!(finalizers["x-kubernetes-list-type"], "set");
        // Every reference resolves inside the document.
        let mut found = Vec::new();
        references(&core, &mut found);
        assert!(!found.is_empty());
        for target in found {
            let name = target.strip_prefix(V3_REFS).expect("a v3 reference");
            assert!(schemas.get(name).is_some(), "{target} does not resolve");
        }
    }

    #[test]
    fn the_v2_document_covers_every_group_with_v2_references() {
        let registry = registry();
        let document = document_v2(&registry);
        assert_eq!(document["swagger"], "2.0");
        let definitions = &document["definitions"];
        for name in [
            "io.k8s.api.core.v1.LimitRange",
            "io.k8s.api.storage.v1.StorageClass",
            "io.k8s.api.scheduling.v1.PriorityClass",
            "dev.relaymesh.v1alpha1.Placement",
        ] {
            assert!(definitions.get(name).is_some(), "{name} missing");
        }
        let mut found = Vec::new();
        references(&document, &mut found);
        for target in found {
            let name = target.strip_prefix(V2_REFS).expect("a v2 reference");
            assert!(definitions.get(name).is_some(), "{target} does not resolve");
        }
        let post = &document["paths"]["/api/v1/namespaces/{namespace}/limitranges"]["post"];
        assert_eq!(post["parameters"][2]["name"], "fieldValidation");
        assert_eq!(post["parameters"][2]["type"], "string");
        assert_eq!(
            post["responses"]["200"]["schema"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.LimitRange"
        );
    }
}
