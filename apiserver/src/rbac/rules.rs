//! One RBAC rule against one request, and one set of rules against
//! another: kube-apiserver's `RuleAllows` (`plugin/pkg/auth/authorizer/rbac`)
//! with the helpers of `pkg/apis/rbac/v1/evaluation_helpers.go`, and the
//! `Covers` of its escalation check (`pkg/registry/rbac/validation`),
//! matched the same way, wildcard for wildcard.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::attributes::Attributes;

/// `*` in `verbs`, `apiGroups`, `resources` or `nonResourceURLs`.
const ALL: &str = "*";

fn list(field: &Option<Vec<String>>) -> &[String] {
    field.as_deref().unwrap_or_default()
}

/// Whether `rule` allows `attributes`: the verb, the group, the resource
/// (`resource/subresource`, `*`, `*/subresource`) and the name for a
/// resource request; the verb and the path for a non-resource one.
/// Discovery and self reviews are nobody's rules to grant.
pub(super) fn rule_allows(attributes: &Attributes, rule: &PolicyRule) -> bool {
    match attributes {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let combined = match subresource {
                Some(subresource) => format!("{resource}/{subresource}"),
                None => resource.clone(),
            };
            verb_matches(rule, verb)
                && api_group_matches(rule, group)
                && resource_matches(rule, &combined, subresource.as_deref().unwrap_or_default())
                && resource_name_matches(rule, name.as_deref().unwrap_or_default())
        }
        Attributes::NonResource { verb, path } => {
            verb_matches(rule, verb) && non_resource_url_matches(rule, path)
        }
        Attributes::Discovery | Attributes::SelfReview => false,
    }
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|ruled| ruled == ALL || ruled == verb)
}

fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups)
        .iter()
        .any(|ruled| ruled == ALL || ruled == group)
}

/// `combined` is `resource` or `resource/subresource`; a rule's
/// `*/subresource` matches that subresource of every resource.
fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    list(&rule.resources).iter().any(|ruled| {
        ruled == ALL
            || ruled == combined
            || (!subresource.is_empty()
                && ruled.len() == subresource.len() + 2
                && ruled.starts_with("*/")
                && ruled.ends_with(subresource))
    })
}

/// No `resourceNames` allows every name; otherwise the request must name
/// one of them, so a list or a create (which name nothing) is not allowed.
fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || names.iter().any(|ruled| ruled == name)
}

/// `*` matches every path; `/prefix*` every path that starts with `/prefix`.
fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls).iter().any(|ruled| {
        ruled == ALL
            || ruled == path
            || ruled
                .strip_suffix(ALL)
                .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
    })
}

/// The rules of `servant` that `owner` does not cover, each broken down to
/// one group, resource, verb and name (or one path and verb), as
/// kube-apiserver's `Covers` reports them: empty when holding `owner` is
/// enough to grant `servant`.
pub(super) fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|simple| !owner.iter().any(|rule| rule_covers(rule, simple)))
        .collect()
}

/// `rule` as rules of one group, resource, verb and name each, and one
/// path and verb each.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |value: &String| Some(vec![value.clone()]);
    let mut simple = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..PolicyRule::default()
                };
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    simple.push(base);
                } else {
                    simple.extend(names.iter().map(|name| PolicyRule {
                        resource_names: one(name),
                        ..base.clone()
                    }));
                }
            }
        }
    }
    for path in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            simple.push(PolicyRule {
                non_resource_urls: one(path),
                verbs: vec![verb.clone()],
                ..PolicyRule::default()
            });
        }
    }
    simple
}

fn has(set: &[String], value: &str) -> bool {
    set.iter().any(|item| item == value)
}

fn has_all(set: &[String], values: &[String]) -> bool {
    values.iter().all(|value| has(set, value))
}

/// Whether `owner` grants everything `sub` does (kube-apiserver's
/// `ruleCovers`).
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = has(list(&owner.api_groups), ALL)
        || has_all(list(&owner.api_groups), list(&sub.api_groups));
    let resources = resources_cover(list(&owner.resources), list(&sub.resources));
    let paths = list(&sub.non_resource_urls).iter().all(|path| {
        list(&owner.non_resource_urls)
            .iter()
            .any(|owned| non_resource_url_covers(owned, path))
    });
    let owner_names = list(&owner.resource_names);
    let names = owner_names.is_empty()
        || (!list(&sub.resource_names).is_empty()
            && has_all(owner_names, list(&sub.resource_names)));
    verbs && groups && resources && names && paths
}

fn resources_cover(owned: &[String], asked: &[String]) -> bool {
    if has(owned, ALL) || has_all(owned, asked) {
        return true;
    }
    asked.iter().all(|resource| {
        has(owned, resource)
            || resource
                .split_once('/')
                .is_some_and(|(_, subresource)| has(owned, &format!("*/{subresource}")))
    })
}

fn non_resource_url_covers(owned: &str, path: &str) -> bool {
    owned == path
        || owned
            .strip_suffix(ALL)
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// A rule as kube-apiserver's `CompactString` prints it in escalation
/// errors: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
pub(super) fn compact(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, values) in [
        ("APIGroups", list(&rule.api_groups)),
        ("Resources", list(&rule.resources)),
        ("NonResourceURLs", list(&rule.non_resource_urls)),
        ("ResourceNames", list(&rule.resource_names)),
        ("Verbs", &rule.verbs[..]),
    ] {
        if !values.is_empty() {
            parts.push(format!("{label}:{}", go_quoted(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// A list of strings as Go's `%q` prints it: `["a" "b"]`.
pub(super) fn go_quoted(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|value| format!("{value:?}")).collect();
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Option<Vec<String>> {
        (!values.is_empty()).then(|| values.iter().map(|value| value.to_string()).collect())
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|verb| verb.to_string()).collect(),
            api_groups: strings(groups),
            resources: strings(resources),
            resource_names: strings(names),
            non_resource_urls: None,
        }
    }

    fn urls(verbs: &[&str], paths: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|verb| verb.to_string()).collect(),
            non_resource_urls: strings(paths),
            ..PolicyRule::default()
        }
    }

    fn request(verb: &str, group: &str, resource: &str, name: Option<&str>) -> Attributes {
        let (resource, subresource) = match resource.split_once('/') {
            Some((resource, subresource)) => (resource, Some(subresource.to_string())),
            None => (resource, None),
        };
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource,
            namespace: Some("team-a".into()),
            name: name.map(str::to_string),
        }
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes::NonResource {
            verb: verb.into(),
            path: path.into(),
        }
    }

    #[test]
    fn rules_match_requests_as_kube_apiserver_does() {
        let placements = rule(&["create"], &["relaymesh.dev"], &["placements"], &[]);
        let everything = rule(&["*"], &["*"], &["*"], &[]);
        let reads = rule(&["get", "list", "watch"], &["", "apps"], &["*"], &[]);
        let named = rule(&["get", "update"], &[""], &["configmaps"], &["settings"]);
        let status = rule(&["update"], &["apps"], &["*/status"], &[]);
        let scale = rule(&["patch"], &["apps"], &["deployments/scale"], &[]);
        let health = urls(&["get"], &["/healthz", "/metrics/*"]);
        let any_path = urls(&["*"], &["*"]);
        let rows: Vec<(&PolicyRule, Attributes, bool)> = vec![
            // Verb, group and resource must all match.
            (
                &placements,
                request("create", "relaymesh.dev", "placements", None),
                true,
            ),
            (
                &placements,
                request("delete", "relaymesh.dev", "placements", None),
                false,
            ),
            (
                &placements,
                request("create", "", "placements", None),
                false,
            ),
            (
                &placements,
                request("create", "relaymesh.dev", "clusters", None),
                false,
            ),
            // A rule on a resource does not reach its subresources.
            (
                &placements,
                request("create", "relaymesh.dev", "placements/status", None),
                false,
            ),
            // `*` everywhere, but only for resources.
            (
                &everything,
                request("escalate", "rbac.authorization.k8s.io", "roles", Some("x")),
                true,
            ),
            (
                &everything,
                request("get", "apps", "deployments/scale", Some("web")),
                true,
            ),
            (&everything, path("get", "/healthz"), false),
            // `*` resources include subresources; groups are exact.
            (&reads, request("get", "", "pods/log", Some("web")), true),
            (&reads, request("watch", "apps", "deployments", None), true),
            (&reads, request("list", "batch", "jobs", None), false),
            (&reads, request("create", "", "pods", None), false),
            // resourceNames: only requests naming one of them.
            (
                &named,
                request("get", "", "configmaps", Some("settings")),
                true,
            ),
            (
                &named,
                request("get", "", "configmaps", Some("other")),
                false,
            ),
            (&named, request("list", "", "configmaps", None), false),
            (
                &named,
                request("update", "", "configmaps", Some("settings")),
                true,
            ),
            // `*/subresource` is that subresource of every resource.
            (
                &status,
                request("update", "apps", "deployments/status", Some("web")),
                true,
            ),
            (
                &status,
                request("update", "apps", "statefulsets/status", Some("db")),
                true,
            ),
            (
                &status,
                request("update", "apps", "deployments", Some("web")),
                false,
            ),
            (
                &status,
                request("update", "apps", "deployments/scale", Some("web")),
                false,
            ),
            (
                &scale,
                request("patch", "apps", "deployments/scale", Some("web")),
                true,
            ),
            (
                &scale,
                request("patch", "apps", "deployments", Some("web")),
                false,
            ),
            // nonResourceURLs: exact, or a prefix ending in `*`.
            (&health, path("get", "/healthz"), true),
            (&health, path("get", "/healthz/ping"), false),
            (&health, path("post", "/healthz"), false),
            (&health, path("get", "/metrics/cadvisor"), true),
            (&health, path("get", "/metrics"), false),
            (&health, request("get", "", "healthz", None), false),
            (&any_path, path("delete", "/anything/at/all"), true),
            // Discovery is granted to everyone elsewhere, not by rules.
            (&everything, Attributes::Discovery, false),
        ];
        for (rule, attributes, expected) in rows {
            assert_eq!(
                rule_allows(&attributes, rule),
                expected,
                "{} on {attributes:?}",
                compact(rule)
            );
        }
    }

    #[test]
    fn covering_breaks_rules_down_as_kube_apiserver_does() {
        let admin = [rule(&["*"], &["*"], &["*"], &[]), urls(&["*"], &["*"])];
        let operator = [rule(
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
            &["*"],
            &["*"],
            &[],
        )];
        let team = [
            rule(&["*"], &["relaymesh.dev"], &["placements"], &[]),
            rule(&["get"], &[""], &["configmaps"], &["settings", "flags"]),
            rule(&["update"], &["apps"], &["*/status"], &[]),
        ];
        let rows: Vec<(&[PolicyRule], PolicyRule, usize)> = vec![
            // Everything covers everything.
            (
                &admin,
                rule(
                    &["escalate", "bind"],
                    &["rbac.authorization.k8s.io"],
                    &["clusterroles"],
                    &[],
                ),
                0,
            ),
            (&admin, urls(&["get"], &["/metrics"]), 0),
            // The operator's explicit verbs do not cover `*` or others.
            (
                &operator,
                rule(
                    &["get", "create"],
                    &["apps", ""],
                    &["deployments", "pods"],
                    &[],
                ),
                0,
            ),
            (&operator, rule(&["*"], &["apps"], &["deployments"], &[]), 1),
            (
                &operator,
                rule(&["issue", "get"], &["relaymesh.dev"], &["jointokens"], &[]),
                1,
            ),
            (&operator, urls(&["get"], &["/healthz"]), 1),
            // `*` verbs cover every named verb; exact groups cover only themselves.
            (
                &team,
                rule(
                    &["create", "delete"],
                    &["relaymesh.dev"],
                    &["placements"],
                    &[],
                ),
                0,
            ),
            (
                &team,
                rule(&["create"], &["relaymesh.dev", ""], &["placements"], &[]),
                1,
            ),
            // Names: an owner's names cover only those names, never all.
            (
                &team,
                rule(&["get"], &[""], &["configmaps"], &["settings"]),
                0,
            ),
            (
                &team,
                rule(&["get"], &[""], &["configmaps"], &["settings", "secrets"]),
                1,
            ),
            (&team, rule(&["get"], &[""], &["configmaps"], &[]), 1),
            // `*/status` covers every status subresource, not the resource.
            (
                &team,
                rule(
                    &["update"],
                    &["apps"],
                    &["deployments/status", "replicasets/status"],
                    &[],
                ),
                0,
            ),
            (
                &team,
                rule(&["update"], &["apps"], &["deployments"], &[]),
                1,
            ),
        ];
        for (owner, servant, missing) in rows {
            let uncovered = uncovered(owner, std::slice::from_ref(&servant));
            assert_eq!(
                uncovered.len(),
                missing,
                "{} by {:?}: {:?}",
                compact(&servant),
                owner.iter().map(compact).collect::<Vec<_>>(),
                uncovered.iter().map(compact).collect::<Vec<_>>()
            );
        }
        assert_eq!(
            compact(&rule(&["get"], &[""], &["configmaps"], &["a"])),
            r#"{APIGroups:[""], Resources:["configmaps"], ResourceNames:["a"], Verbs:["get"]}"#
        );
    }
}
