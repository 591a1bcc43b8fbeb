//! Unknown fields, as kube-apiserver's `fieldValidation` query parameter
//! treats them: `Strict` refuses a write that has any (400, "strict decoding
//! error"), `Warn` (the default) stores it and says so in `Warning` headers,
//! `Ignore` says nothing. Fields are unknown when the kind's schema does not
//! name them: built-ins' schemas come from their types (via `openapi`),
//! custom kinds' from their CRD. Open parts of a schema (preserved unknown
//! fields, free-form objects, int-or-string) accept anything. No IO.

use serde_json::Value;

use super::openapi;
use super::resources::Resource;
use super::ApiError;

/// What to do with unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldValidation {
    /// Store them silently.
    Ignore,
    /// Store them and warn.
    Warn,
    /// Refuse the write.
    Strict,
}

impl FieldValidation {
    /// The `fieldValidation` query parameter's value; `Warn` when absent,
    /// as in kube-apiserver.
    pub(super) fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(ApiError::BadRequest(format!(
                "fieldValidation: invalid value {other:?}: supported values are \"Ignore\", \"Warn\", \"Strict\""
            ))),
        }
    }
}

/// Checks `object` against the schema of `resource`: the warnings to send
/// (`Warn`), or the error (`Strict`).
pub(super) fn check(
    mode: FieldValidation,
    resource: &Resource,
    object: &Value,
) -> Result<Vec<String>, ApiError> {
    if mode == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let unknown = unknown_fields(resource, object);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let messages: Vec<String> = unknown
        .iter()
        .map(|path| format!("unknown field {path:?}"))
        .collect();
    match mode {
        FieldValidation::Strict => Err(ApiError::BadRequest(format!(
            "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
            resource.kind,
            resource.version,
            resource.kind,
            messages.join(", ")
        ))),
        _ => Ok(messages),
    }
}

/// The paths (`spec.template.spec.containers[0].foo`) of the fields of
/// `object` that the schema of `resource` does not name.
pub(super) fn unknown_fields(resource: &Resource, object: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some((root, definitions)) = openapi::builtin_schema(resource) {
        Walk {
            definitions: Some(definitions),
            unknown: &mut unknown,
        }
        .visit(root, object, "");
    } else if let Some(schema) = &resource.schema {
        let Some(fields) = object.as_object() else {
            return unknown;
        };
        let mut walk = Walk {
            definitions: None,
            unknown: &mut unknown,
        };
        // A CRD's schema need not name the fields every object has.
        for (field, value) in fields {
            if matches!(field.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match schema.pointer(&format!("/properties/{}", escape(field))) {
                Some(property) => walk.visit(property, value, field),
                None if is_open(schema) => {}
                None => walk.unknown.push(field.clone()),
            }
        }
    }
    unknown
}

/// A walk of an object and its schema side by side.
struct Walk<'a> {
    /// Where `$ref`s point (built-ins); `None` for inline CRD schemas.
    definitions: Option<&'a std::collections::BTreeMap<String, Value>>,
    unknown: &'a mut Vec<String>,
}

impl<'a> Walk<'a> {
    fn visit(&mut self, schema: &'a Value, value: &Value, path: &str) {
        let schema = self.resolve(schema);
        if is_open(schema) {
            return;
        }
        match value {
            Value::Object(fields) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    for (field, value) in fields {
                        let inner = join(path, field);
                        match properties.get(field) {
                            Some(property) => self.visit(property, value, &inner),
                            None => self.unknown.push(inner),
                        }
                    }
                } else if let Some(values) = schema.get("additionalProperties") {
                    if values.is_object() {
                        for (field, value) in fields {
                            self.visit(values, value, &join(path, field));
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        self.visit(item_schema, item, &format!("{path}[{index}]"));
                    }
                }
            }
            _ => {}
        }
    }

    /// `schema`, or what its `$ref` (possibly inside a one-element `allOf`)
    /// points to.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        let reference = schema.get("$ref").or_else(|| {
            schema
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|all| all.len() == 1)
                .and_then(|all| all[0].get("$ref"))
        });
        let target = reference
            .and_then(Value::as_str)
            .and_then(|target| target.rsplit('/').next())
            .and_then(|name| self.definitions?.get(name));
        target.unwrap_or(schema)
    }
}

/// Whether a schema takes any fields: preserved unknown fields, embedded
/// resources, int-or-string, or an object with neither properties nor a
/// schema for its values.
fn is_open(schema: &Value) -> bool {
    let flag = |name: &str| schema.get(name) == Some(&Value::Bool(true));
    flag("x-kubernetes-preserve-unknown-fields")
        || flag("x-kubernetes-int-or-string")
        || flag("x-kubernetes-embedded-resource")
        || (schema.get("properties").is_none()
            && schema.get("additionalProperties").is_none()
            && schema.get("items").is_none()
            && schema.get("$ref").is_none()
            && schema.get("allOf").is_none())
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// `field` as a JSON pointer token.
fn escape(field: &str) -> String {
    field.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::resources::Registry;

    fn resource(group: &str, plural: &str) -> Resource {
        Registry::without_definitions()
            .find(group, "v1", plural)
            .expect("served")
            .clone()
    }

    #[test]
    fn unknown_fields_are_found_at_any_depth() {
        let deployments = resource("apps", "deployments");
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"a": "b"}, "colour": "red"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"a": "b"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [
                        {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1"}}},
                        {"name": "d", "image": "nginx", "imagePolicy": "x"},
                    ]},
                },
                "replica": 3,
            },
            "extra": true,
        });
        let mut found = unknown_fields(&deployments, &deployment);
        found.sort();
        assert_eq!(
            found,
            [
                "extra",
                "metadata.colour",
                "spec.replica",
                "spec.template.spec.containers[1].imagePolicy",
            ]
        );
        let error =
            check(FieldValidation::Strict, &deployments, &deployment).expect_err("strict refuses");
        assert!(
            error
                .to_string()
                .contains("strict decoding error: unknown field \"extra\""),
            "{error}"
        );
        let warnings =
            check(FieldValidation::Warn, &deployments, &deployment).expect("warn stores");
        assert_eq!(warnings.len(), 4);
        assert!(check(FieldValidation::Ignore, &deployments, &deployment)
            .expect("ignore stores")
            .is_empty());
    }

    #[test]
    fn open_parts_take_anything() {
        let config_maps = resource("", "configmaps");
        let config_map = json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
            "data": {"any": "key", "other": "value"},
        });
        assert!(unknown_fields(&config_maps, &config_map).is_empty());
        let definitions = resource("apiextensions.k8s.io", "customresourcedefinitions");
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "properties": {"spec": {"type": "object", "default": {"a": 1},
                            "x-kubernetes-preserve-unknown-fields": true}}}}}]},
        });
        assert_eq!(
            unknown_fields(&definitions, &crd),
            Vec::<String>::new(),
            "JSONSchemaProps are open where they hold JSON"
        );
    }

    #[test]
    fn custom_kinds_follow_their_crd_schema() {
        let mut widgets = resource("", "configmaps");
        widgets.builtin = false;
        widgets.group = "example.com".into();
        widgets.kind = "Widget".into();
        widgets.schema = Some(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
        }}));
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"size": 1, "colour": "red"}, "extra": 1});
        let mut found = unknown_fields(&widgets, &widget);
        found.sort();
        assert_eq!(found, ["extra", "spec.colour"]);
        assert_eq!(
            FieldValidation::parse(None).expect("default"),
            FieldValidation::Warn
        );
        assert!(FieldValidation::parse(Some("Loud")).is_err());
    }
}
