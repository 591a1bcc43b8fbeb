//! Unknown fields, as kube-apiserver's `fieldValidation` query parameter
//! treats them: `Strict` refuses a write that has any (400, "strict decoding
//! error"), `Warn` (the default) stores it and says so in `Warning` headers,
//! `Ignore` says nothing. Fields are unknown when the kind's schema does not
//! name them: built-ins' schemas come from their types (via `openapi`),
//! custom kinds' from their CRD, an extension's kinds from the schema it
//! gives them ([`crate::Resource::schema`]). Open parts of a schema (preserved unknown
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
    decide(mode, resource, inspect(resource, object))
}

/// [`check`] of a write to the main resource of a kind with a `status`
/// subresource: the status it carries is not stored (the stored one is
/// kept), so it is not checked either. A field the server's own status
/// writer added then never makes a later `kubectl apply` of the object
/// fail.
pub(super) fn check_main(
    mode: FieldValidation,
    resource: &Resource,
    object: &Value,
) -> Result<Vec<String>, ApiError> {
    let mut findings = inspect(resource, object);
    if resource.status {
        let in_status = |path: &str| path == "status" || path.starts_with("status.");
        findings.unknown.retain(|path| !in_status(path));
        findings
            .mistyped
            .retain(|mistyped| !in_status(&mistyped.path));
    }
    decide(mode, resource, findings)
}

/// What `mode` makes of `findings`: the warnings to send, or the error.
fn decide(
    mode: FieldValidation,
    resource: &Resource,
    Findings { unknown, mistyped }: Findings,
) -> Result<Vec<String>, ApiError> {
    if let Some(first) = mistyped.first() {
        // A value of the wrong type cannot be decoded: kube-apiserver
        // refuses it whatever fieldValidation says.
        return Err(ApiError::BadRequest(format!(
            "{} in version {:?} cannot be handled as a {}: json: cannot unmarshal {} into Go struct field {} of type {}",
            resource.kind, resource.version, resource.kind, first.found, first.path, first.expected
        )));
    }
    if mode == FieldValidation::Ignore || unknown.is_empty() {
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

/// What a walk of an object along its schema found.
#[derive(Debug, Default)]
struct Findings {
    /// The paths (`spec.template.spec.containers[0].foo`) of the fields the
    /// schema does not name.
    unknown: Vec<String>,
    /// The values whose JSON type is not the schema's.
    mistyped: Vec<Mistyped>,
}

/// A value of the wrong type.
#[derive(Debug)]
struct Mistyped {
    path: String,
    expected: String,
    found: &'static str,
}

/// The paths of the fields of `object` that the schema of `resource` does
/// not name.
#[cfg(test)]
fn unknown_fields(resource: &Resource, object: &Value) -> Vec<String> {
    inspect(resource, object).unknown
}

/// Walks `object` along the schema of `resource`.
fn inspect(resource: &Resource, object: &Value) -> Findings {
    let mut findings = Findings::default();
    if let Some((root, definitions)) = openapi::builtin_schema(resource) {
        Walk {
            definitions: Some(definitions),
            findings: &mut findings,
        }
        .visit(root, object, "");
    } else if let Some(schema) = &resource.schema {
        inspect_custom(schema, object, &mut findings);
    }
    findings
}

/// Walks `object` along a custom kind's `schema` (a CRD's or an
/// extension's), which need not name the fields every object has.
fn inspect_custom(schema: &Value, object: &Value, findings: &mut Findings) {
    let Some(fields) = object.as_object() else {
        return;
    };
    let mut walk = Walk {
        definitions: None,
        findings,
    };
    for (field, value) in fields {
        if matches!(field.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match schema.pointer(&format!("/properties/{}", escape(field))) {
            Some(property) => walk.visit(property, value, field),
            None if is_open(schema) => {}
            None => walk.findings.unknown.push(field.clone()),
        }
    }
}

/// What checking an object against a custom kind's schema found
/// ([`check_schema`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaFindings {
    /// The paths (`spec.rollout.maxConcurency`) of the fields the schema
    /// does not name.
    pub unknown: Vec<String>,
    /// The paths of the values whose JSON type is not the schema's.
    pub mistyped: Vec<String>,
}

/// Checks `object` against `schema`, a structural schema as
/// [`crate::Resource::schema`] takes it, the way writes of such a kind are
/// checked: for tests of an extension's schemas, and for objects an
/// extension reads on paths of its own.
pub fn check_schema(schema: &Value, object: &Value) -> SchemaFindings {
    let mut findings = Findings::default();
    inspect_custom(schema, object, &mut findings);
    SchemaFindings {
        unknown: findings.unknown,
        mistyped: findings
            .mistyped
            .into_iter()
            .map(|mistyped| mistyped.path)
            .collect(),
    }
}

/// `object` without the fields the schema of the built-in `resource` does
/// not name: what kube-apiserver would have stored, and what its protobuf
/// message can carry. Other kinds are returned as they are.
pub(super) fn pruned(resource: &Resource, object: &Value) -> Value {
    let mut object = object.clone();
    if let Some((root, definitions)) = openapi::builtin_schema(resource) {
        let mut findings = Findings::default();
        Walk {
            definitions: Some(definitions),
            findings: &mut findings,
        }
        .prune(root, &mut object);
    }
    object
}

/// A walk of an object and its schema side by side.
struct Walk<'a> {
    /// Where `$ref`s point (built-ins); `None` for inline CRD schemas.
    definitions: Option<&'a std::collections::BTreeMap<String, Value>>,
    findings: &'a mut Findings,
}

impl<'a> Walk<'a> {
    fn visit(&mut self, schema: &'a Value, value: &Value, path: &str) {
        let schema = self.resolve(schema);
        if let Some(expected) = schema.get("type").and_then(Value::as_str) {
            if let Some(found) = mismatch(expected, value) {
                self.findings.mistyped.push(Mistyped {
                    path: if path.is_empty() {
                        "(root)".into()
                    } else {
                        path.to_string()
                    },
                    expected: expected.to_string(),
                    found,
                });
                return;
            }
        }
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
                            None => self.findings.unknown.push(inner),
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

    /// Removes from `value` what `schema` does not name.
    fn prune(&mut self, schema: &'a Value, value: &mut Value) {
        let schema = self.resolve(schema);
        if is_open(schema) {
            return;
        }
        match value {
            Value::Object(fields) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    fields.retain(|field, _| properties.contains_key(field));
                    for (field, value) in fields.iter_mut() {
                        if let Some(property) = properties.get(field) {
                            self.prune(property, value);
                        }
                    }
                } else if let Some(values) = schema.get("additionalProperties") {
                    if values.is_object() {
                        for value in fields.values_mut() {
                            self.prune(values, value);
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for item in items {
                        self.prune(item_schema, item);
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

/// The JSON type of `value` if it is not `expected` (an OpenAPI type).
/// `null` fits every type, as Go's decoder reads it as the zero value.
fn mismatch(expected: &str, value: &Value) -> Option<&'static str> {
    let fits = match value {
        Value::Null => true,
        Value::Bool(_) => expected == "boolean",
        Value::Number(number) => {
            expected == "number" || (expected == "integer" && (number.is_i64() || number.is_u64()))
        }
        Value::String(_) => expected == "string",
        Value::Array(_) => expected == "array",
        Value::Object(_) => expected == "object",
    };
    if fits {
        return None;
    }
    Some(match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    })
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
    use crate::resources::Registry;

    fn resource(group: &str, plural: &str) -> Resource {
        Registry::without_definitions(&crate::resources::example_extension())
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
        let kept = pruned(&deployments, &deployment);
        assert!(unknown_fields(&deployments, &kept).is_empty());
        assert_eq!(kept["spec"]["replicas"], 2);
        assert_eq!(
            kept["spec"]["template"]["spec"]["containers"][1]["image"],
            "nginx"
        );
        let warnings =
            check(FieldValidation::Warn, &deployments, &deployment).expect("warn stores");
        assert_eq!(warnings.len(), 4);
        assert!(check(FieldValidation::Ignore, &deployments, &deployment)
            .expect("ignore stores")
            .is_empty());
    }

    #[test]
    fn values_of_the_wrong_type_are_refused_in_every_mode() {
        let deployments = resource("apps", "deployments");
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": "three", "selector": {"matchLabels": {"a": "b"}},
                "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80.5}]}]}}},
        });
        for mode in [
            FieldValidation::Ignore,
            FieldValidation::Warn,
            FieldValidation::Strict,
        ] {
            let error = check(mode, &deployments, &deployment).expect_err("refused");
            assert!(
                error.to_string().contains(
                    "cannot unmarshal string into Go struct field spec.replicas of type integer"
                ),
                "{error}"
            );
        }
        let mistyped: Vec<String> = inspect(&deployments, &deployment)
            .mistyped
            .into_iter()
            .map(|m| m.path)
            .collect();
        assert_eq!(
            mistyped,
            [
                "spec.replicas",
                "spec.template.spec.containers[0].ports[0].containerPort"
            ]
        );
        let config_maps = resource("", "configmaps");
        let numeric = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
            "data": {"n": 1}});
        assert!(check(FieldValidation::Warn, &config_maps, &numeric).is_err());
        let fine = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a",
            "creationTimestamp": null}, "data": {"n": "1"}});
        assert!(check(FieldValidation::Strict, &config_maps, &fine).is_ok());
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
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {"size": {"type": "integer", "default": 1,
                                "enum": [1, 2]}}}}}}}]},
        });
        assert_eq!(
            unknown_fields(&definitions, &crd),
            Vec::<String>::new(),
            "JSONSchemaProps are open where they hold JSON"
        );
        assert!(check(FieldValidation::Strict, &definitions, &crd).is_ok());
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
        // The main resource keeps the stored status: what a body carries
        // there is not checked; the status subresource checks it.
        let mut with_status = widget.clone();
        with_status["spec"] = json!({"size": 1});
        with_status
            .as_object_mut()
            .expect("an object")
            .remove("extra");
        with_status["status"] = json!({"phase": "x"});
        widgets.status = true;
        assert!(check_main(FieldValidation::Strict, &widgets, &with_status).is_ok());
        let error = check(FieldValidation::Strict, &widgets, &with_status).expect_err("strict");
        assert!(
            error.to_string().contains("unknown field \"status\""),
            "{error}"
        );
        assert_eq!(
            FieldValidation::parse(None).expect("default"),
            FieldValidation::Warn
        );
        assert!(FieldValidation::parse(Some("Loud")).is_err());
    }
}
