//! What the server does to special objects when they are written or deleted:
//! CustomResourceDefinitions get their status (`Established`, accepted
//! names), must be named `plural.group` and may not use a group the
//! extension reserves ([`crate::Extension::reserved_groups`]); Namespaces get
//! `status.phase`; deleting either deletes what it holds. No HTTP here.
//!
//! A CRD in a reserved group stored before the group was reserved is not
//! served ([`without_reserved`]), is named in a warning at startup
//! ([`warn_reserved`]), and can be deleted, which deletes nothing else: the
//! objects under its group and plural are the extension's.

use serde_json::{json, Value};
use tracing::{info, warn};

use super::resources::{Registry, Resource, CRD_GROUP, CRD_RESOURCE};
use super::validation::is_dns1123_subdomain;
use super::ApiError;
use crate::objects::{ObjectKey, ObjectStore};

/// Namespaces that may not be deleted, as in Kubernetes.
const PROTECTED_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Checks and completes a special object before it is stored; a CRD may
/// not use one of the `reserved` groups.
pub(super) fn prepare(
    resource: &Resource,
    object: &mut Value,
    reserved: &[String],
) -> Result<(), ApiError> {
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "namespaces") => {
            object["status"] = json!({"phase": "Active"});
            if object.pointer("/spec/finalizers").is_none() {
                object["spec"] = json!({"finalizers": ["kubernetes"]});
            }
            Ok(())
        }
        (CRD_GROUP, CRD_RESOURCE) => {
            check_group(object, reserved)?;
            prepare_definition(object)
        }
        ("", "secrets") => {
            fold_string_data(object);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Refuses a CRD in a reserved group, whoever asks: the extension's own
/// kinds there win over a CRD, so clients would see two definitions.
fn check_group(object: &Value, reserved: &[String]) -> Result<(), ApiError> {
    let group = object
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if reserved.iter().any(|taken| taken == group) {
        return Err(ApiError::Invalid {
            field: "spec.group".into(),
            message: format!(
                "Invalid value: {group:?}: the {group} group is reserved for the server's own kinds; \
                 a CustomResourceDefinition may not use it"
            ),
        });
    }
    Ok(())
}

/// `registry` without the kinds of stored CRDs in a reserved group (only
/// the `extension`'s own kinds are served there); unchanged, and not
/// copied, when there are none.
pub(super) fn without_reserved(
    registry: Registry,
    extension: &[Resource],
    reserved: &[String],
) -> Registry {
    let from_definition = |resource: &Resource| {
        reserved.contains(&resource.group)
            && !extension.iter().any(|own| {
                own.group == resource.group
                    && own.version == resource.version
                    && own.plural == resource.plural
            })
    };
    if !registry.all().iter().any(from_definition) {
        return registry;
    }
    Registry::from_resources(
        registry
            .all()
            .iter()
            .filter(|resource| !from_definition(resource))
            .cloned()
            .collect(),
    )
}

/// Warns of every stored CRD in a reserved group (stored before the group
/// was reserved): it is not served, and `kubectl delete crd NAME` removes
/// it. Never fails: a store that cannot be read is the server's next
/// problem, not this check's.
pub(super) fn warn_reserved(store: &ObjectStore, reserved: &[String]) {
    if reserved.is_empty() {
        return;
    }
    let Ok((definitions, _)) = store.list(CRD_GROUP, CRD_RESOURCE, None) else {
        return;
    };
    for definition in &definitions {
        let group = definition
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if reserved.iter().any(|taken| taken == group) {
            let name = definition
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            warn!(
                crd = name,
                group,
                "a stored CustomResourceDefinition is in a reserved group: not served; remove it with kubectl delete crd"
            );
        }
    }
}

/// Moves a Secret's `stringData` into `data`, base64-encoded, as the
/// Kubernetes API does on every write.
fn fold_string_data(object: &mut Value) {
    use base64::Engine as _;
    let Some(Value::Object(strings)) = object
        .as_object_mut()
        .and_then(|fields| fields.remove("stringData"))
    else {
        return;
    };
    if !object["data"].is_object() {
        object["data"] = json!({});
    }
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        object["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn prepare_definition(object: &mut Value) -> Result<(), ApiError> {
    let invalid = |field: &str, message: &str| ApiError::Invalid {
        field: field.to_string(),
        message: message.to_string(),
    };
    let spec = &object["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    if group.is_empty() || !group.contains('.') || !is_dns1123_subdomain(group) {
        return Err(invalid(
            "spec.group",
            "Invalid value: should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() || !is_dns1123_subdomain(plural) {
        return Err(invalid("spec.names.plural", "Required value"));
    }
    if kind.is_empty() {
        return Err(invalid("spec.names.kind", "Required value"));
    }
    if !matches!(spec["scope"].as_str(), Some("Namespaced" | "Cluster")) {
        return Err(invalid(
            "spec.scope",
            "Unsupported value: must be Namespaced or Cluster",
        ));
    }
    let versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if versions.is_empty()
        || versions
            .iter()
            .any(|version| version["name"].as_str().is_none())
    {
        return Err(invalid(
            "spec.versions",
            "Required value: must have at least one version with a name",
        ));
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            "metadata.name",
            &format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let mut accepted = spec["names"].clone();
    if accepted.get("singular").is_none() {
        accepted["singular"] = json!(kind.to_lowercase());
    }
    if accepted.get("listKind").is_none() {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let stored_versions: Vec<Value> = versions
        .iter()
        .filter(|version| version["storage"].as_bool().unwrap_or(false))
        .map(|version| version["name"].clone())
        .collect();
    object["status"] = json!({
        "acceptedNames": accepted,
        "storedVersions": stored_versions,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    });
    Ok(())
}

/// Refuses deletions Kubernetes refuses.
pub(super) fn check_delete(resource: &Resource, name: &str) -> Result<(), ApiError> {
    if resource.group.is_empty()
        && resource.plural == "namespaces"
        && PROTECTED_NAMESPACES.contains(&name)
    {
        return Err(ApiError::Forbidden(format!(
            "namespaces {name:?} is forbidden: this namespace may not be deleted"
        )));
    }
    Ok(())
}

/// Deletes what a deleted special object held: a namespace's objects, a
/// CRD's custom objects (none for a CRD in one of the `reserved` groups:
/// what sits under its group and plural is the extension's).
pub(super) fn delete_contents(
    store: &ObjectStore,
    resource: &Resource,
    deleted: &Value,
    reserved: &[String],
) -> Result<(), ApiError> {
    let name = deleted
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let held: Box<dyn Fn(&ObjectKey) -> bool> =
        match (resource.group.as_str(), resource.plural.as_str()) {
            ("", "namespaces") => {
                let name = name.to_string();
                Box::new(move |key: &ObjectKey| key.namespace.as_deref() == Some(name.as_str()))
            }
            (CRD_GROUP, CRD_RESOURCE) => {
                let group = deleted
                    .pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if reserved.contains(&group) {
                    return Ok(());
                }
                let plural = deleted
                    .pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                Box::new(move |key: &ObjectKey| key.group == group && key.resource == plural)
            }
            _ => return Ok(()),
        };
    let internal = |error: crate::objects::ObjectError| ApiError::Internal(error.to_string());
    let mut count = 0_usize;
    for (key, _) in store.list_all().map_err(internal)? {
        if held(&key) {
            match store.delete(&key) {
                Ok(_) | Err(crate::objects::ObjectError::NotFound(_)) => count += 1,
                Err(error) => return Err(internal(error)),
            }
        }
    }
    info!(resource = %resource.qualified(), name, deleted = count, "deleted what the object held");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::resources::Registry;
    use super::*;

    #[test]
    fn definitions_get_status_and_named_checks() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let store = ObjectStore::open(db.open_tree("o").expect("a tree")).expect("opens");
        let registry =
            Registry::load(&store, &crate::resources::example_extension()).expect("loads");
        let crds = registry
            .find(CRD_GROUP, "v1", CRD_RESOURCE)
            .expect("served");
        let mut crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]},
        });
        prepare(crds, &mut crd, &[]).expect("valid");
        assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
        assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
        crd["metadata"]["name"] = json!("other.example.com");
        assert!(matches!(
            prepare(crds, &mut crd, &[]),
            Err(ApiError::Invalid { .. })
        ));

        let secrets = registry.find("", "v1", "secrets").expect("served");
        let mut secret = json!({"stringData": {"password": "hunter2"}, "data": {"user": "YQ=="}});
        prepare(secrets, &mut secret, &[]).expect("valid");
        assert_eq!(
            secret,
            json!({"data": {"user": "YQ==", "password": "aHVudGVyMg=="}})
        );

        let namespaces = registry.find("", "v1", "namespaces").expect("served");
        assert!(matches!(
            check_delete(namespaces, "default"),
            Err(ApiError::Forbidden(_))
        ));
        assert!(check_delete(namespaces, "shop").is_ok());
        let key = ObjectKey::new("", "configmaps", Some("shop"), "a");
        store
            .create(&key, json!({"metadata": {}}))
            .expect("creates");
        delete_contents(
            &store,
            namespaces,
            &json!({"metadata": {"name": "shop"}}),
            &[],
        )
        .expect("deletes");
        assert_eq!(store.get(&key).expect("reads"), None);
    }

    fn reserved() -> Vec<String> {
        vec!["relaymesh.dev".to_string()]
    }

    fn definition(group: &str, plural: &str) -> Value {
        json!({
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": "Thing"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]},
        })
    }

    #[test]
    fn a_definition_in_a_reserved_group_is_refused() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let store = ObjectStore::open(db.open_tree("o").expect("a tree")).expect("opens");
        let registry = Registry::load(&store, &[]).expect("loads");
        let crds = registry
            .find(CRD_GROUP, "v1", CRD_RESOURCE)
            .expect("served");
        for plural in ["placements", "clusters", "jointokens", "widgets"] {
            let error = prepare(crds, &mut definition("relaymesh.dev", plural), &reserved())
                .expect_err("reserved");
            assert!(
                matches!(&error, ApiError::Invalid { field, message }
                    if field == "spec.group" && message.contains("the relaymesh.dev group is reserved")),
                "{error:?}"
            );
        }
        // Other groups, and subdomains of the reserved one, are anyone's.
        for group in ["example.com", "x.relaymesh.dev"] {
            prepare(crds, &mut definition(group, "widgets"), &reserved()).expect("not reserved");
        }
    }

    #[test]
    fn a_stored_definition_in_a_reserved_group_is_not_served_and_its_deletion_deletes_nothing_else()
    {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = sled::open(dir.path()).expect("sled opens");
        let store = ObjectStore::open(db.open_tree("o").expect("a tree")).expect("opens");
        let extension = crate::resources::example_extension();
        let group = extension[0].group.clone();
        let plural = extension[0].plural.clone();
        let mut stored = Vec::new();
        for (group, plural, version) in [
            (group.as_str(), plural.as_str(), "v1"),
            (group.as_str(), "extras", "v1"),
            ("example.com", "widgets", "v1"),
        ] {
            let mut crd = definition(group, plural);
            crd["spec"]["versions"][0]["name"] = json!(version);
            let name = format!("{plural}.{group}");
            store
                .create(
                    &ObjectKey::new(CRD_GROUP, CRD_RESOURCE, None, &name),
                    crd.clone(),
                )
                .expect("stored, as an older version would have");
            stored.push(crd);
        }
        let reserved = vec![group.clone()];
        warn_reserved(&store, &reserved);
        let registry = without_reserved(
            Registry::load(&store, &extension).expect("loads"),
            &extension,
            &reserved,
        );
        assert!(registry.find(&group, "v1", "extras").is_none());
        assert!(registry.find(&group, "v1", &plural).is_none());
        assert!(registry.find("example.com", "v1", "widgets").is_some());
        assert!(
            registry
                .find(&group, &extension[0].version, &plural)
                .is_some(),
            "the extension's own kind is still served"
        );

        let own = ObjectKey::new(&group, &plural, Some("shop"), "mine");
        store
            .create(&own, json!({"metadata": {}}))
            .expect("creates");
        let crds = registry
            .find(CRD_GROUP, "v1", CRD_RESOURCE)
            .expect("served");
        delete_contents(&store, crds, &stored[0], &reserved).expect("deletes");
        assert!(
            store.get(&own).expect("reads").is_some(),
            "the extension's objects stay"
        );
    }
}
