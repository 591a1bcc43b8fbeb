//! kube-apiserver's escalation check for writes of roles and bindings
//! ([`Rbac::check_escalation`]): a user may only grant what they hold,
//! unless the extension lets them `escalate` a role or `bind` one. It sits
//! apart from the authorizer because it asks the [`Extension`], and the
//! [`Extension`] trait names [`Rbac`]: the authorizer itself knows nothing
//! of extensions.

use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleRef};
use serde_json::Value;

use super::{decode, name_of, rules, Rbac, RbacError, AUTHENTICATED, GROUP};
use crate::attributes::Attributes;
use crate::extension::Extension;
use crate::tls::User;

impl Rbac {
    /// kube-apiserver's escalation check for a write of `object`, a
    /// `resource` (`roles`, `clusterroles`, `rolebindings`,
    /// `clusterrolebindings`; others pass) in `namespace`, by `user`:
    ///
    /// * a role's rules must all be held by the user where the role
    ///   applies, unless the user may `escalate` it;
    /// * a binding's role must be held entirely by the user in the
    ///   binding's namespace, unless the user may `bind` it.
    ///
    /// `Err` carries the reason for the 403. Asks `extension` about
    /// `escalate` and `bind`, so those verbs are decided as any other.
    pub fn check_escalation<E: Extension + ?Sized>(
        &self,
        extension: &E,
        user: &User,
        resource: &str,
        namespace: Option<&str>,
        object: &Value,
    ) -> Result<(), String> {
        let name = name_of(object);
        let asked = |verb: &str, resource: &str, name: &str| Attributes::Resource {
            verb: verb.into(),
            group: GROUP.into(),
            resource: resource.into(),
            subresource: None,
            namespace: namespace.map(str::to_string),
            name: Some(name.to_string()),
        };
        let policy = self.policy().map_err(|error| error.to_string())?;
        let malformed = |error: RbacError| error.to_string();
        let (granted, refused_as) = match resource {
            "roles" | "clusterroles" => {
                if extension
                    .authorize(user, &asked("escalate", resource, &name))
                    .is_ok()
                {
                    return Ok(());
                }
                let rules = if resource == "roles" {
                    decode::<Role>("Role", object).map_err(malformed)?.rules
                } else {
                    decode::<ClusterRole>("ClusterRole", object)
                        .map_err(malformed)?
                        .rules
                };
                (rules.unwrap_or_default(), resource)
            }
            "rolebindings" | "clusterrolebindings" => {
                let role_ref = object
                    .get("roleRef")
                    .cloned()
                    .map(serde_json::from_value::<RoleRef>)
                    .transpose()
                    .map_err(|error| format!("roleRef is malformed: {error}"))?
                    .ok_or_else(|| "roleRef: Required value".to_string())?;
                let plural = if role_ref.kind == "Role" {
                    "roles"
                } else {
                    "clusterroles"
                };
                if extension
                    .authorize(user, &asked("bind", plural, &role_ref.name))
                    .is_ok()
                {
                    return Ok(());
                }
                let rules = policy
                    .role_rules(&role_ref, namespace.unwrap_or_default())
                    .ok_or_else(|| {
                        format!(
                            "{}.{GROUP} {:?} not found",
                            role_ref.kind.to_lowercase(),
                            role_ref.name
                        )
                    })?;
                (rules.to_vec(), resource)
            }
            _ => return Ok(()),
        };
        let held = policy.rules_for(user, namespace);
        let missing = rules::uncovered(&held, &granted);
        if missing.is_empty() {
            return Ok(());
        }
        let mut groups = user.groups.clone();
        groups.push(AUTHENTICATED.into());
        let listed: Vec<String> = missing.iter().map(rules::compact).collect();
        Err(format!(
            "{refused_as}.{GROUP} {name:?} is forbidden: user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            user.name,
            rules::go_quoted(&groups),
            listed.join("\n")
        ))
    }
}
