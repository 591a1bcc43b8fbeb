//! OpenAPI v3 documents, as kube-apiserver serves them under `/openapi/v3`:
//! an index of group-versions, and per group-version a document whose PATCH
//! operations carry `x-kubernetes-group-version-kind` and a `fieldValidation`
//! parameter (kubectl checks that to decide whether the server validates
//! fields), and whose schemas carry `x-kubernetes-group-version-kind` (what
//! `kubectl explain` and client-side apply look kinds up by).
//!
//! Schemas: a CRD's `openAPIV3Schema`; for built-ins a short description of
//! the common fields (merge keys included where strategic merge patch needs
//! them), permissive elsewhere. No IO.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::{json, Map, Value};

use super::resources::{Registry, Resource};

/// `/openapi/v3`: the group-versions and where their documents are.
pub(super) fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    let mut group_versions: Vec<(String, String)> = registry
        .all()
        .iter()
        .map(|resource| (resource.group.clone(), resource.version.clone()))
        .collect();
    group_versions.dedup();
    for (group, version) in group_versions {
        let path = document_path(&group, &version);
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

/// The document of `path` (`api/v1` or `apis/{group}/{version}`).
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
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
        object_meta(),
    );
    for resource in resources {
        let gvk =
            json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let scope = if resource.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let item = format!("{prefix}{scope}/{}/{{name}}", resource.plural);
        let collection = format!("{prefix}{scope}/{}", resource.plural);
        let schema_ref = json!({"$ref": format!("#/components/schemas/{}", schema_name(resource))});
        let response = json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}});
        let operation = |action: &str, parameters: Value| {
            json!({
                "operationId": format!("{action}{}", resource.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters,
                "responses": response,
            })
        };
        let field_validation = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let mut item_operations = json!({"get": operation("get", json!([]))});
        let mut collection_operations = json!({"get": operation("list", json!([]))});
        if resource.is_writable() {
            item_operations["put"] = operation("replace", field_validation.clone());
            item_operations["patch"] = operation("patch", field_validation.clone());
            item_operations["delete"] = operation("delete", json!([]));
            collection_operations["post"] = operation("create", field_validation);
        }
        paths.insert(item, item_operations);
        paths.insert(collection, collection_operations);
        schemas.insert(schema_name(resource), schema(resource));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
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

/// The schema's name, Kubernetes style: the group reversed, then version and kind.
fn schema_name(resource: &Resource) -> String {
    let group = match resource.group.as_str() {
        "" => "io.k8s.api.core".to_string(),
        group if resource.builtin => {
            format!("io.k8s.api.{}", group.split('.').next().unwrap_or(group))
        }
        group => group.split('.').rev().collect::<Vec<_>>().join("."),
    };
    format!("{group}.{}.{}", resource.version, resource.kind)
}

fn schema(resource: &Resource) -> Value {
    let mut schema = resource
        .schema
        .clone()
        .or_else(|| builtin_body(&resource.kind))
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if schema.get("description").is_none() {
        schema["description"] = json!(format!(
            "{} ({}), stored by relaymesh.",
            resource.kind,
            resource.api_version()
        ));
    }
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut properties = properties;
    properties.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
    properties.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
    properties.insert("metadata".into(), json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}, "description": "Standard object's metadata."}));
    schema["properties"] = Value::Object(properties);
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": resource.group, "version": resource.version, "kind": resource.kind}]);
    schema
}

fn object_meta() -> Value {
    let strings =
        json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}});
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "properties": {
            "name": {"type": "string", "description": "Name must be unique within a namespace."},
            "namespace": {"type": "string", "description": "Namespace defines the space within which each name must be unique."},
            "labels": strings,
            "annotations": strings,
            "generateName": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "uid": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        },
    })
}

/// Short schemas of the most used built-ins' bodies.
fn builtin_body(kind: &str) -> Option<Value> {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let strings = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let container = json!({
        "type": "object",
        "description": "A single application container.",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "name": {"type": "string", "description": "Name of the container."},
            "image": {"type": "string", "description": "Container image name."},
            "ports": {"type": "array", "items": open, "x-kubernetes-patch-merge-key": "containerPort", "x-kubernetes-patch-strategy": "merge"},
            "env": {"type": "array", "items": open, "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"},
        },
    });
    let pod_spec = json!({
        "type": "object",
        "description": "PodSpec is a description of a pod.",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "containers": {"type": "array", "items": container, "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge", "description": "List of containers belonging to the pod."},
            "initContainers": {"type": "array", "items": container, "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"},
            "volumes": {"type": "array", "items": open, "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge,retainKeys"},
        },
    });
    let body = match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => json!({
            "description": format!("{kind} enables declarative updates for Pods."),
            "properties": {
                "spec": {
                    "type": "object",
                    "description": format!("Specification of the desired behavior of the {kind}."),
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {
                        "replicas": {"type": "integer", "format": "int32", "description": "Number of desired pods."},
                        "selector": open,
                        "template": {"type": "object", "description": "Template describes the pods that will be created.", "properties": {"metadata": open, "spec": pod_spec}},
                    },
                },
                "status": open,
            },
        }),
        "Service" => json!({
            "description": "Service is a named abstraction of software service.",
            "properties": {
                "spec": {
                    "type": "object",
                    "description": "Spec defines the behavior of a service.",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {
                        "type": {"type": "string"},
                        "selector": strings,
                        "ports": {"type": "array", "items": open, "x-kubernetes-patch-merge-key": "port", "x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"]},
                    },
                },
                "status": open,
            },
        }),
        "ConfigMap" => json!({
            "description": "ConfigMap holds configuration data for pods to consume.",
            "properties": {"data": strings, "binaryData": strings, "immutable": {"type": "boolean"}},
        }),
        "Secret" => json!({
            "description": "Secret holds secret data of a certain type.",
            "properties": {"data": strings, "stringData": strings, "type": {"type": "string"}, "immutable": {"type": "boolean"}},
        }),
        _ => return None,
    };
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ObjectStore;

    #[test]
    fn index_and_documents_have_kubectl_shape() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let store = ObjectStore::open(db.open_tree("o").expect("a tree")).expect("opens");
        let registry = Registry::load(&store).expect("loads");
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
        assert!(schema["properties"]["spec"]["properties"]["replicas"].is_object());
        assert!(document(&registry, "apis/nope/v1").is_none());
        assert!(document(&registry, "nonsense").is_none());
    }
}
