//! Who may do what at the root: the API's three groups and the one decision
//! function every request and every `SelfSubjectAccessReview` goes through
//! (the apiserver asks it through [`relaymesh_apiserver::Extension::authorize`]).
//!
//! Groups come from the client certificate's organizations; a user in several has the widest of their rights:
//!
//! | group       | may                                                        |
//! |-------------|------------------------------------------------------------|
//! | `viewers`   | get, list and watch everything but Secrets                 |
//! | `operators` | also read Secrets; create, change and delete workloads and placements |
//! | `admins`    | also issue and revoke join tokens, users and nodes         |
//!
//! Every authenticated user may read discovery and ask about their own
//! rights, as in kube-apiserver (`system:discovery`, `system:basic-user`).

use relaymesh_apiserver::{Attributes, User};

/// The group that may read.
pub const VIEWERS: &str = "viewers";
/// The group that may also change workloads and placements.
pub const OPERATORS: &str = "operators";
/// The group that may also issue and revoke join tokens, user certificates
/// and nodes.
pub const ADMINS: &str = "admins";

/// The groups, narrowest first.
pub const GROUPS: [&str; 3] = [VIEWERS, OPERATORS, ADMINS];

/// The relaymesh resources only admins may write: they hand out or take
/// away access (a move hands its node a join token).
const ADMIN_RESOURCES: [&str; 4] = ["jointokens", "usercertificates", "revocations", "moves"];

/// The resources (group, plural) whose objects are secrets: reading them
/// takes an operator, as kube-apiserver's `view` role leaves Secrets out.
/// Nothing else at the root holds secret data: join tokens and user
/// certificates are handed out once and never stored readable, and a
/// cluster's live Secret comes up without its data (`observed`).
const SECRET_RESOURCES: [(&str, &str); 1] = [("", "secrets")];

/// How wide a user's rights are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    None,
    Viewer,
    Operator,
    Admin,
}

fn rank(user: &User) -> Rank {
    user.groups
        .iter()
        .map(|group| match group.as_str() {
            VIEWERS => Rank::Viewer,
            OPERATORS => Rank::Operator,
            ADMINS => Rank::Admin,
            _ => Rank::None,
        })
        .max()
        .unwrap_or(Rank::None)
}

/// Whether `user` may do what `attributes` says; `Err` carries the reason
/// for a 403, worded as kube-apiserver words it.
pub fn decide(user: &User, attributes: &Attributes) -> Result<(), String> {
    let (verb, group, resource, subresource, namespace) = match attributes {
        Attributes::Discovery | Attributes::SelfReview => return Ok(()),
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
        } => (verb, group, resource, subresource, namespace),
    };
    let read = matches!(verb.as_str(), "get" | "list" | "watch");
    let secret = SECRET_RESOURCES.contains(&(group.as_str(), resource.as_str()));
    let needed = if read && !secret {
        Rank::Viewer
    } else if read {
        Rank::Operator
    } else if group == crate::placement::RELAYMESH_GROUP
        && ADMIN_RESOURCES.contains(&resource.as_str())
    {
        Rank::Admin
    } else {
        Rank::Operator
    };
    if rank(user) >= needed {
        return Ok(());
    }
    let full = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.clone(),
    };
    let place = match namespace {
        Some(namespace) => format!(" in the namespace {namespace:?}"),
        None => " at the cluster scope".to_string(),
    };
    let qualified = if group.is_empty() {
        resource.clone()
    } else {
        format!("{resource}.{group}")
    };
    Err(format!(
        "{qualified} is forbidden: User {:?} cannot {verb} resource {full:?} in API group {group:?}{place}: {}",
        user.name,
        match needed {
            Rank::Admin => "only the group admins may",
            Rank::Operator => "the groups operators and admins may",
            _ => "the groups viewers, operators and admins may",
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(groups: &[&str]) -> User {
        User {
            name: "someone".into(),
            groups: groups.iter().map(|group| group.to_string()).collect(),
        }
    }

    fn request(verb: &str, group: &str, resource: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: Some("default".into()),
        }
    }

    #[test]
    fn each_group_has_exactly_its_rights() {
        let rows = [
            // (verb, group, resource, viewers, operators, admins)
            ("get", "apps", "deployments", true, true, true),
            ("watch", "", "pods", true, true, true),
            ("create", "apps", "deployments", false, true, true),
            ("patch", "relaymesh.dev", "placements", false, true, true),
            ("delete", "", "namespaces", false, true, true),
            // Secrets, as kube-apiserver's `view` role: not for viewers.
            ("get", "", "secrets", false, true, true),
            ("list", "", "secrets", false, true, true),
            ("watch", "", "secrets", false, true, true),
            ("get", "", "configmaps", true, true, true),
            ("list", "", "serviceaccounts", true, true, true),
            ("create", "relaymesh.dev", "jointokens", false, false, true),
            (
                "create",
                "relaymesh.dev",
                "usercertificates",
                false,
                false,
                true,
            ),
        ];
        for (verb, group, resource, viewers, operators, admins) in rows {
            let attributes = request(verb, group, resource);
            for (groups, expected) in [
                (&[VIEWERS][..], viewers),
                (&[OPERATORS][..], operators),
                (&[ADMINS][..], admins),
            ] {
                assert_eq!(
                    decide(&user(groups), &attributes).is_ok(),
                    expected,
                    "{groups:?} {verb} {resource}"
                );
            }
            // No known group: nothing but discovery and self reviews.
            assert!(decide(&user(&["system:masters"]), &attributes).is_err());
        }
        assert!(decide(&user(&[]), &Attributes::Discovery).is_ok());
        assert!(decide(&user(&[]), &Attributes::SelfReview).is_ok());
        // The widest group counts.
        assert!(decide(
            &user(&[VIEWERS, ADMINS]),
            &request("create", "relaymesh.dev", "jointokens")
        )
        .is_ok());
    }

    #[test]
    fn a_refusal_says_who_what_and_who_may() {
        let reason = decide(&user(&[VIEWERS]), &request("create", "apps", "deployments"))
            .expect_err("a viewer may not create");
        assert!(
            reason.starts_with("deployments.apps is forbidden: "),
            "{reason}"
        );
        assert!(reason.contains("User \"someone\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"default\""), "{reason}");
        assert!(reason.contains("operators and admins"), "{reason}");
    }
}
