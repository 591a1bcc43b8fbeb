//! One cluster's live copy for `relayctl get KIND/NAME --cluster` and
//! `relayctl events --cluster`: naming a kind as people type it, asking the
//! root's `clusters/NAME/object` and `clusters/NAME/events` subresources,
//! and the events table.

use std::time::SystemTime;

use serde_json::Value;

use super::{Client, ClientError, GROUP_PATH, REQUEST_TIMEOUT};

/// The Table `kubectl get` on the cluster would print for `objects`: the
/// kind's usual columns (READY, UP-TO-DATE and AVAILABLE for a
/// Deployment), as the root's API prints its own objects of that kind.
pub fn object_table(kind: &KindRef, objects: &[Value]) -> Value {
    let lower = kind.kind.to_lowercase();
    let plural = match lower.strip_suffix('s') {
        Some(_) => format!("{lower}es"),
        None => format!("{lower}s"),
    };
    relaymesh_apiserver::table_of_objects(&kind.group, &plural, objects, SystemTime::now())
}

/// A kind, as the query names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindRef {
    /// `""` for the core group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

/// The kinds relayctl knows by short name, singular or plural:
/// (names, group, version, kind).
const ALIASES: &[(&[&str], &str, &str, &str)] = &[
    (
        &["deploy", "deployment", "deployments"],
        "apps",
        "v1",
        "Deployment",
    ),
    (
        &["sts", "statefulset", "statefulsets"],
        "apps",
        "v1",
        "StatefulSet",
    ),
    (
        &["ds", "daemonset", "daemonsets"],
        "apps",
        "v1",
        "DaemonSet",
    ),
    (
        &["rs", "replicaset", "replicasets"],
        "apps",
        "v1",
        "ReplicaSet",
    ),
    (&["svc", "service", "services"], "", "v1", "Service"),
    (&["cm", "configmap", "configmaps"], "", "v1", "ConfigMap"),
    (&["secret", "secrets"], "", "v1", "Secret"),
    (&["ns", "namespace", "namespaces"], "", "v1", "Namespace"),
    (
        &["sa", "serviceaccount", "serviceaccounts"],
        "",
        "v1",
        "ServiceAccount",
    ),
    (
        &["pvc", "persistentvolumeclaim", "persistentvolumeclaims"],
        "",
        "v1",
        "PersistentVolumeClaim",
    ),
    (&["job", "jobs"], "batch", "v1", "Job"),
    (&["cj", "cronjob", "cronjobs"], "batch", "v1", "CronJob"),
    (
        &["ing", "ingress", "ingresses"],
        "networking.k8s.io",
        "v1",
        "Ingress",
    ),
    (
        &["hpa", "horizontalpodautoscaler", "horizontalpodautoscalers"],
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
    ),
];

/// The kind `name` names: a short name, singular or plural from the table
/// (`deploy`, `deployment`, `deployments`), the same qualified by its
/// group (`deployments.apps`), or any kind spelled out as
/// `Kind.version.group` (`Widget.v1.example.com`; `ConfigMap.v1` for the
/// core group).
pub fn kind_ref(name: &str) -> Option<KindRef> {
    let (short, group) = match name.split_once('.') {
        Some((short, group)) => (short, Some(group)),
        None => (name, None),
    };
    let lower = short.to_ascii_lowercase();
    let known = ALIASES.iter().find(|(names, alias_group, _, _)| {
        names.contains(&lower.as_str()) && group.is_none_or(|group| group == *alias_group)
    });
    if let Some((_, group, version, kind)) = known {
        return Some(KindRef {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        });
    }
    // Kind.version[.group], the kind capitalised as Kubernetes writes it.
    let (version, group) = group?.split_once('.').unwrap_or((group?, ""));
    let spelled = short.starts_with(|c: char| c.is_ascii_uppercase())
        && version.starts_with('v')
        && !version.is_empty();
    spelled.then(|| KindRef {
        group: group.to_string(),
        version: version.to_string(),
        kind: short.to_string(),
    })
}

/// The kinds relayctl knows by short name, for an error message.
pub fn known_kinds() -> String {
    ALIASES
        .iter()
        .map(|(names, _, _, _)| names[0])
        .collect::<Vec<_>>()
        .join(", ")
}

impl Client {
    /// The `ClusterObject` holding `cluster`'s live copy of `kind` `name`
    /// (in `namespace`), as its agent reads it now, or as a relay last saw
    /// it (`stale`, `ageSeconds`) when the agent is out of reach.
    pub async fn cluster_object(
        &self,
        cluster: &str,
        kind: &KindRef,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ClientError> {
        let mut parameters = vec![
            ("group", kind.group.as_str()),
            ("version", kind.version.as_str()),
            ("kind", kind.kind.as_str()),
            ("name", name),
        ];
        if let Some(namespace) = namespace {
            parameters.push(("namespace", namespace));
        }
        self.cluster_subresource(cluster, "object", &parameters)
            .await
    }

    /// The `ClusterEvents` of `cluster`: its recent events, newest first,
    /// in `namespace` or every namespace its agent shows.
    pub async fn cluster_events(
        &self,
        cluster: &str,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Value, ClientError> {
        let limit = limit.to_string();
        let mut parameters = vec![("limit", limit.as_str())];
        if let Some(namespace) = namespace {
            parameters.push(("namespace", namespace));
        }
        self.cluster_subresource(cluster, "events", &parameters)
            .await
    }

    async fn cluster_subresource(
        &self,
        cluster: &str,
        subresource: &str,
        parameters: &[(&str, &str)],
    ) -> Result<Value, ClientError> {
        let path = format!("{GROUP_PATH}/clusters/{cluster}/{subresource}");
        let request = self
            .http
            .get(self.url(&path))
            .query(parameters)
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }
}

/// The note printed on stderr for a stale answer, if it is one.
pub fn stale_note(reply: &Value) -> Option<String> {
    if reply["stale"].as_bool() != Some(true) {
        return None;
    }
    let cluster = reply["cluster"].as_str().unwrap_or("the cluster");
    let age = reply["ageSeconds"].as_u64().unwrap_or(0);
    Some(format!(
        "warning: {cluster} is not reachable; this is its last reported state, {} old",
        short_duration(age)
    ))
}

/// The events of a `ClusterEvents` as a table: LAST SEEN (how long ago,
/// from `now`), TYPE, REASON, OBJECT, MESSAGE.
pub fn render_events(reply: &Value, now: SystemTime) -> String {
    let mut rows = vec![["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        .map(str::to_string)
        .to_vec()];
    for event in reply["items"].as_array().into_iter().flatten() {
        let text = |key: &str| event[key].as_str().unwrap_or("").to_string();
        let last_seen = event["lastSeen"]
            .as_str()
            .and_then(|time| humantime::parse_rfc3339_weak(time).ok())
            .map(|time| {
                let age = now.duration_since(time).unwrap_or_default().as_secs();
                short_duration(age)
            })
            .unwrap_or_else(|| "<unknown>".into());
        let message = text("message").replace('\n', " ");
        rows.push(vec![
            last_seen,
            text("type"),
            text("reason"),
            text("object"),
            message,
        ]);
    }
    if rows.len() == 1 {
        return "No events found.\n".into();
    }
    super::resources::render_rows(&rows)
}

/// `seconds` as kubectl writes an age: `45s`, `12m`, `3h`, `5d`.
fn short_duration(seconds: u64) -> String {
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7_199 => format!("{}m", seconds / 60),
        7_200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(group: &str, version: &str, kind: &str) -> Option<KindRef> {
        Some(KindRef {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        })
    }

    #[test]
    fn a_deployment_shows_its_kinds_columns() {
        let deployment = kind("apps", "v1", "Deployment").expect("a kind");
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 2},
            "status": {"readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1},
        });
        let table = object_table(&deployment, &[object]);
        let text = crate::client::resources::render_table_as(&table, &Default::default());
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
        assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
        let row: Vec<&str> = lines.next().expect("a row").split_whitespace().collect();
        assert_eq!(&row[..4], ["web", "1/2", "2", "1"]);
        let service = kind("", "v1", "Service").expect("a kind");
        let table = object_table(
            &service,
            &[json!({"metadata": {"name": "web"}, "spec": {"type": "ClusterIP"}})],
        );
        let text = crate::client::resources::render_table_as(&table, &Default::default());
        assert!(text.starts_with("NAME") && text.contains("TYPE"), "{text}");
    }

    #[test]
    fn kinds_are_named_as_kubectl_names_them() {
        let deployment = kind("apps", "v1", "Deployment");
        for name in [
            "deploy",
            "deployment",
            "deployments",
            "deployments.apps",
            "Deployment",
        ] {
            assert_eq!(kind_ref(name), deployment, "{name}");
        }
        assert_eq!(kind_ref("cm"), kind("", "v1", "ConfigMap"));
        assert_eq!(
            kind_ref("Widget.v1.example.com"),
            kind("example.com", "v1", "Widget")
        );
        assert_eq!(kind_ref("ConfigMap.v1"), kind("", "v1", "ConfigMap"));
        assert_eq!(kind_ref("deployments.batch"), None);
        assert_eq!(kind_ref("widgets"), None);
    }

    #[test]
    fn events_render_newest_first_with_their_age() {
        let now = humantime::parse_rfc3339("2026-11-25T10:05:00Z").expect("a time");
        let reply = json!({"items": [
            {"lastSeen": "2026-11-25T10:04:30Z", "type": "Normal", "reason": "ScalingReplicaSet",
             "object": "deployment/web", "message": "Scaled up\nto 2"},
            {"lastSeen": null, "type": "Warning", "reason": "Failed", "object": "pod/web-1", "message": "x"}
        ]});
        let text = render_events(&reply, now);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("LAST SEEN   TYPE"), "{text}");
        assert!(
            lines[1].starts_with("30s         Normal    ScalingReplicaSet"),
            "{text}"
        );
        assert!(lines[1].ends_with("Scaled up to 2"), "{text}");
        assert!(lines[2].starts_with("<unknown>"), "{text}");
        assert_eq!(
            render_events(&json!({"items": []}), now),
            "No events found.\n"
        );
    }

    #[test]
    fn only_a_stale_answer_gets_a_note() {
        let stale = json!({"cluster": "edge-1", "stale": true, "ageSeconds": 150});
        assert_eq!(
            stale_note(&stale).as_deref(),
            Some("warning: edge-1 is not reachable; this is its last reported state, 2m old")
        );
        assert_eq!(stale_note(&json!({"stale": false})), None);
    }
}
