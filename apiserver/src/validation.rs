//! Validation of objects written through the API, as kube-apiserver's
//! generic checks do it: type meta against the URL, names and namespaces
//! (unknown fields are `field_validation`'s). Failures are `422 Invalid`
//! with the field path; then the extension's validator
//! ([`validate_for_extension`]); no IO.

use serde_json::Value;

use super::resources::Resource;
use super::ApiError;

/// Fills `apiVersion` and `kind` from the URL where the body leaves them
/// out (or empty), as kube-apiserver's decoder does with the request's
/// group, version and kind: the official client libraries' typed APIs send
/// such bodies. A body that names another API version is refused with 400,
/// in kube-apiserver's words; another kind is left for [`validate`] (422).
pub(super) fn default_type_meta(resource: &Resource, object: &mut Value) -> Result<(), ApiError> {
    let Some(fields) = object.as_object_mut() else {
        return Ok(()); // `validate` says what is wrong with it
    };
    for (key, default) in [
        ("apiVersion", resource.api_version()),
        ("kind", resource.kind.clone()),
    ] {
        let absent = match fields.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::String(value)) => value.is_empty(),
            Some(_) => false,
        };
        if absent {
            fields.insert(key.to_string(), Value::String(default));
        }
    }
    match fields.get("apiVersion") {
        Some(Value::String(api_version)) if *api_version != resource.api_version() => {
            Err(ApiError::BadRequest(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                resource.api_version()
            )))
        }
        _ => Ok(()),
    }
}

/// Checks an object to be stored as `resource` under `name` (from the URL,
/// if there is one) in `namespace` (from the URL).
pub(super) fn validate(
    resource: &Resource,
    namespace: Option<&str>,
    name: Option<&str>,
    object: &Value,
) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::BadRequest(
            "the object must be a JSON object".into(),
        ));
    }
    let api_version = required_string(object, "apiVersion")?;
    let kind = required_string(object, "kind")?;
    if api_version != resource.api_version() {
        return Err(invalid(
            "apiVersion",
            format!(
                "Invalid value: {api_version:?}: must be {:?} for {}",
                resource.api_version(),
                resource.qualified()
            ),
        ));
    }
    if kind != resource.kind {
        return Err(invalid(
            "kind",
            format!(
                "Invalid value: {kind:?}: must be {:?} for {}",
                resource.kind,
                resource.qualified()
            ),
        ));
    }
    let object_name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if object_name.is_empty() {
        return Err(invalid(
            "metadata.name",
            "Required value: name or generateName is required".into(),
        ));
    }
    if let Some(name) = name {
        if object_name != name {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({object_name}) does not match the name on the URL ({name})"
            )));
        }
    }
    let name_ok = if resource.plural == "namespaces" {
        is_dns1123_label(object_name)
    } else {
        is_dns1123_subdomain(object_name)
    };
    if !name_ok {
        let what = if resource.plural == "namespaces" {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
        } else {
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        };
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: {object_name:?}: {what}"),
        ));
    }
    if let Some(object_namespace) = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        if resource.namespaced
            && !object_namespace.is_empty()
            && Some(object_namespace) != namespace
        {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
    }
    if let Some(labels) = object.pointer("/metadata/labels") {
        let valid = labels
            .as_object()
            .is_some_and(|labels| labels.values().all(Value::is_string));
        if !valid {
            return Err(invalid(
                "metadata.labels",
                "Invalid value: labels must be a map of strings".into(),
            ));
        }
        for (key, value) in labels.as_object().into_iter().flatten() {
            if let Some(message) = label_error(key, value.as_str().unwrap_or_default()) {
                return Err(invalid("metadata.labels", message));
            }
        }
    }
    Ok(())
}

/// The extension's own check of an object of its kind, after [`validate`]
/// and the unknown-field check: kube-apiserver decodes (and refuses
/// unknown fields under `Strict`) before it validates, so a misspelled
/// field is named as unknown rather than reported as a missing one.
pub(super) fn validate_for_extension(
    resource: &Resource,
    namespace: Option<&str>,
    object: &Value,
) -> Result<(), ApiError> {
    match &resource.validator {
        Some(validator) => validator.check(namespace, object),
        None => Ok(()),
    }
}

/// Whether `name` is a DNS-1123 label: at most 63 characters of `[a-z0-9-]`,
/// alphanumeric at both ends.
pub(super) fn is_dns1123_label(name: &str) -> bool {
    name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

pub(super) use relaymesh_topology::labels::is_dns1123_subdomain;
pub use relaymesh_topology::labels::label_error;

fn required_string<'a>(object: &'a Value, field: &str) -> Result<&'a str, ApiError> {
    match object.get(field).and_then(Value::as_str) {
        Some(value) if !value.is_empty() => Ok(value),
        _ => Err(invalid(field, "Required value".into())),
    }
}

fn invalid(field: &str, message: String) -> ApiError {
    ApiError::Invalid {
        field: field.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config_maps() -> Resource {
        crate::resources::builtin("", "configmaps")
    }

    fn field_of(result: Result<(), ApiError>) -> String {
        match result {
            Err(ApiError::Invalid { field, .. }) => field,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn names_and_type_meta() {
        let resource = config_maps();
        let good = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a.b-c"}});
        assert!(validate(&resource, Some("ns"), None, &good).is_ok());
        let cases = [
            (
                json!({"kind": "ConfigMap", "metadata": {"name": "a"}}),
                "apiVersion",
            ),
            (
                json!({"apiVersion": "v1", "metadata": {"name": "a"}}),
                "kind",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
                "metadata.name",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "A_b"}}),
                "metadata.name",
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
                "apiVersion",
            ),
            (
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}),
                "kind",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": 1}}}),
                "metadata.labels",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "a/b"}}}),
                "metadata.labels",
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"-x": "y"}}}),
                "metadata.labels",
            ),
        ];
        for (object, field) in cases {
            assert_eq!(
                field_of(validate(&resource, Some("ns"), None, &object)),
                field,
                "{object}"
            );
        }
    }

    #[test]
    fn type_meta_defaults_from_the_url() {
        let resource = config_maps();
        for body in [
            json!({"metadata": {"name": "a"}}),
            json!({"apiVersion": "", "kind": null, "metadata": {"name": "a"}}),
        ] {
            let mut object = body.clone();
            assert!(default_type_meta(&resource, &mut object).is_ok(), "{body}");
            assert_eq!(object["apiVersion"], "v1", "{body}");
            assert_eq!(object["kind"], "ConfigMap", "{body}");
            assert!(validate(&resource, Some("ns"), None, &object).is_ok());
        }
        let mut other_version = json!({"apiVersion": "apps/v1", "metadata": {"name": "a"}});
        match default_type_meta(&resource, &mut other_version) {
            Err(ApiError::BadRequest(message)) => assert_eq!(
                message,
                "the API version in the data (apps/v1) does not match the expected API version (v1)"
            ),
            other => panic!("expected 400, got {other:?}"),
        }
        // Another kind is kept, for `validate` to refuse with its field.
        let mut other_kind = json!({"kind": "Secret", "metadata": {"name": "a"}});
        assert!(default_type_meta(&resource, &mut other_kind).is_ok());
        assert_eq!(
            field_of(validate(&resource, Some("ns"), None, &other_kind)),
            "kind"
        );
    }

    #[test]
    fn url_mismatches() {
        let resource = config_maps();
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x"}, "extra": 1});
        assert!(matches!(
            validate(&resource, Some("y"), None, &object),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            validate(&resource, Some("x"), Some("b"), &object),
            Err(ApiError::BadRequest(_))
        ));
        assert!(validate(&resource, Some("x"), Some("a"), &object).is_ok());
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1123_label("shop-1"));
        assert!(!is_dns1123_label("shop.eu"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("widgets.example.com"));
        assert!(!is_dns1123_subdomain("a..b"));
    }

    #[test]
    fn labels_and_long_subdomain_parts() {
        assert!(label_error("app.kubernetes.io/name", "web").is_none());
        assert!(label_error("tier", "").is_none());
        assert!(label_error("Tier_1.x", "A-b_c.D").is_none());
        assert!(label_error("managed-by", "corpus.example.com/controller").is_some());
        assert!(label_error("/x", "y").is_some());
        assert!(label_error("Example.com/x", "y").is_some());
        assert!(label_error(&"k".repeat(64), "y").is_some());
        assert!(label_error("k", &"v".repeat(64)).is_some());
        let attachment = format!("csi-{}", "d1005a".repeat(11));
        assert!(attachment.len() > 63);
        assert!(is_dns1123_subdomain(&attachment));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain("-a"));
    }
}
