//! Who may do what at the root: RBAC, from the Roles, ClusterRoles and
//! bindings the root stores ([`relaymesh_apiserver::rbac`]), and the
//! default policy the root writes on every start where it is missing
//! ([`bootstrap`]): the three groups a user certificate names, each bound
//! to a ClusterRole.
//!
//! | group       | ClusterRole          | may                                                     |
//! |-------------|----------------------|---------------------------------------------------------|
//! | `viewers`   | `relaymesh:viewer`   | get, list and watch every built-in and relaymesh kind but Secrets |
//! | `operators` | `relaymesh:operator` | the standard verbs on everything (Secrets included)     |
//! | `admins`    | `relaymesh:admin`    | every verb on everything, relaymesh's own verbs included |
//!
//! What hands out or takes away access has its own verbs ([`ISSUE`],
//! [`REVOKE`], [`MOVE`], [`ROTATE`]), which no standard verb list and so
//! no operator holds: issuing join tokens and user certificates, revoking
//! tokens and nodes, moving a node, rotating the mesh CA.
//!
//! Every authenticated user may read discovery and ask about their own
//! rights, as in kube-apiserver (`system:discovery`, `system:basic-user`).
//!
//! A Placement reaches further than its own namespace when its terms name
//! other namespaces or may select cluster-scoped objects; writing one takes
//! the right to create Placements there too ([`admit_placement`]), so a
//! RoleBinding confines a team to its namespaces' objects.

use relaymesh_apiserver::objects::{ObjectError, ObjectKey, ObjectStore};
use relaymesh_apiserver::rbac::{self, Rbac, GROUP as RBAC_GROUP};
use relaymesh_apiserver::{Attributes, User};
use serde_json::{json, Value};
use tracing::info;

use super::MULTICLUSTER_GROUP;
use crate::placement::RELAYMESH_GROUP;

/// The group that may read.
pub const VIEWERS: &str = "viewers";
/// The group that may also change workloads and placements.
pub const OPERATORS: &str = "operators";
/// The group that may also issue and revoke join tokens, user certificates
/// and nodes.
pub const ADMINS: &str = "admins";

/// The groups, narrowest first.
pub const GROUPS: [&str; 3] = [VIEWERS, OPERATORS, ADMINS];

/// relaymesh's verb for handing out a credential: a join token
/// (`jointokens`) or a user certificate (`usercertificates`).
pub const ISSUE: &str = "issue";
/// relaymesh's verb for taking access away: a join token (`jointokens`)
/// or a node and its subtree (`revocations`).
pub const REVOKE: &str = "revoke";
/// relaymesh's verb for moving a node under another parent (`moves`),
/// which hands it a join token there.
pub const MOVE: &str = "move";

/// relaymesh's verb for rotating what trust rests on: the mesh CA
/// (`meshcarotations`), the token-signing key (`tokenkeyrotations`), the
/// API CA (`apicarotations`) and the API's serving certificate
/// (`apicertificaterotations`).
pub const ROTATE: &str = "rotate";

/// The verbs of every Kubernetes request: what an operator holds.
const STANDARD_VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// The label kube-apiserver puts on its bootstrap policy.
const BOOTSTRAP_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

/// Whether a user certificate may name `group`: one of [`GROUPS`], or any
/// other DNS-1123 label, for a team that RoleBindings name. kube-apiserver's
/// `system:` groups never pass.
pub fn check_group(group: &str) -> Result<(), String> {
    relaymesh_protocol::name::validate(group).map_err(|error| {
        format!(
            "Invalid value: {group:?}: a group is {} or a DNS-1123 label a binding names: {error}",
            GROUPS.join(", ")
        )
    })
}

/// Whether `user` may write `placement` (in `namespace`), given what its
/// workload terms can carry, as the placement module selects:
///
/// * a term naming `namespaces` carries objects of each: the user must be
///   allowed to create Placements in every one besides the Placement's own;
/// * a term without `namespaces` carries the Placement's namespace's
///   objects and cluster-scoped ones, unless its `kind` is namespaced: the
///   user must be allowed to create Placements cluster-wide, except for
///   Namespaces named one by one that they may place in.
///
/// `Err` carries the reason for the `403`.
pub fn admit_placement(
    rbac: &Rbac,
    objects: &ObjectStore,
    user: &User,
    namespace: Option<&str>,
    placement: &Value,
) -> Result<(), String> {
    let metadata = |field: &str| {
        placement
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
    };
    let own = namespace.or(metadata("namespace")).unwrap_or_default();
    let create = |namespace: Option<&str>| Attributes::Resource {
        verb: "create".into(),
        group: RELAYMESH_GROUP.into(),
        resource: "placements".into(),
        subresource: None,
        namespace: namespace.map(str::to_string),
        name: None,
    };
    let may_place = |namespace: Option<&str>| {
        rbac.authorize(user, &create(namespace))
            .map_err(|denied| denied.reason().to_string())
    };
    if may_place(None).is_ok() {
        return Ok(());
    }
    let refusal = |reason: String, why: String| {
        let named = match metadata("name") {
            Some(name) => format!("placements.{RELAYMESH_GROUP} {name:?}"),
            None => format!("placements.{RELAYMESH_GROUP}"),
        };
        // `reason` is the refusal of the create it would take, worded
        // from its "is forbidden:" on.
        let cause = reason
            .split_once(" is forbidden: ")
            .map_or(reason.as_str(), |(_, cause)| cause);
        format!("{named} is forbidden: {cause}: {why}")
    };
    let terms = placement
        .pointer("/spec/workloads")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, term) in terms.iter().enumerate() {
        let strings = |field: &str| -> Vec<&str> {
            term.get(field)
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default()
        };
        let namespaces = strings("namespaces");
        if !namespaces.is_empty() {
            for other in namespaces.into_iter().filter(|other| *other != own) {
                may_place(Some(other)).map_err(|reason| {
                    refusal(
                        reason,
                        format!("spec.workloads[{index}].namespaces names {other:?}, whose objects the Placement would carry"),
                    )
                })?;
            }
            continue;
        }
        let group = term.get("apiGroup").and_then(Value::as_str);
        let kind = term.get("kind").and_then(Value::as_str);
        let namespaced = match kind {
            Some(kind) => {
                rbac::kind_is_namespaced(objects, group, kind).map_err(|error| error.to_string())?
            }
            None => None,
        };
        if namespaced == Some(true) {
            continue;
        }
        let names = strings("names");
        let namespaces_by_name =
            kind == Some("Namespace") && group.is_none_or(str::is_empty) && !names.is_empty();
        if namespaces_by_name {
            for name in names.into_iter().filter(|name| *name != own) {
                may_place(Some(name)).map_err(|reason| {
                    refusal(
                        reason,
                        format!("spec.workloads[{index}].names names the Namespace {name:?}"),
                    )
                })?;
            }
            continue;
        }
        return Err(refusal(
            may_place(None).err().unwrap_or_default(),
            format!(
                "spec.workloads[{index}] may carry cluster-scoped objects; name a namespaced kind, or the namespaces"
            ),
        ));
    }
    Ok(())
}

/// The default ClusterRole of each group: (group, role name, rules).
fn default_roles() -> Vec<(&'static str, String, Value)> {
    let read = ["get", "list", "watch"];
    // RBAC only adds: "everything but Secrets" is every other core resource
    // by name, and every other group whole.
    let builtins = rbac::builtin_resources();
    let core: Vec<&str> = builtins
        .iter()
        .filter(|(group, plural)| group.is_empty() && *plural != "secrets")
        .map(|(_, plural)| *plural)
        .chain(["*/status", "*/scale"])
        .collect();
    let mut groups: Vec<&str> = builtins
        .iter()
        .map(|(group, _)| *group)
        .filter(|group| !group.is_empty())
        .chain([RELAYMESH_GROUP, MULTICLUSTER_GROUP])
        .collect();
    groups.sort_unstable();
    groups.dedup();
    vec![
        (
            VIEWERS,
            "relaymesh:viewer".to_string(),
            json!([
                {"apiGroups": [""], "resources": core, "verbs": read},
                {"apiGroups": groups, "resources": ["*"], "verbs": read},
            ]),
        ),
        (
            OPERATORS,
            "relaymesh:operator".to_string(),
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": STANDARD_VERBS}]),
        ),
        (
            ADMINS,
            "relaymesh:admin".to_string(),
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
    ]
}

/// The default policy: a ClusterRole per group and a ClusterRoleBinding
/// of the group to it, as (plural, name, object).
pub fn defaults() -> Vec<(&'static str, String, Value)> {
    let labels = json!({BOOTSTRAP_LABEL.0: BOOTSTRAP_LABEL.1});
    let mut objects = Vec::new();
    for (group, role, rules) in default_roles() {
        objects.push((
            "clusterroles",
            role.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": role, "labels": labels},
                "rules": rules,
            }),
        ));
        let binding = format!("relaymesh:{group}");
        objects.push((
            "clusterrolebindings",
            binding.clone(),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": binding, "labels": labels},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group}],
            }),
        ));
    }
    objects
}

/// Writes each default role and binding that is not stored, and leaves
/// those that are as they are: an operator's edits survive a restart, and
/// one deleted comes back. Returns the names written.
pub fn bootstrap(objects: &ObjectStore) -> Result<Vec<String>, ObjectError> {
    let mut written = Vec::new();
    for (plural, name, object) in defaults() {
        let key = ObjectKey::new(RBAC_GROUP, plural, None, &name);
        let missing = match objects.get(&key) {
            Ok(found) => found.is_none(),
            // Quarantined: named at readyz; an operator decides.
            Err(ObjectError::Quarantined { .. }) => false,
            Err(error) => return Err(error),
        };
        if missing {
            match objects.create(&key, object) {
                Ok(_) => {
                    info!(%key, "default RBAC object written");
                    written.push(name);
                }
                // Another replica wrote it first.
                Err(ObjectError::AlreadyExists(_)) => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests;
