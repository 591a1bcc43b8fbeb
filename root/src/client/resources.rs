//! Generic Kubernetes resources for relayctl: finding a kind's resource
//! through discovery, server-side apply of any object, tables for `get`, and
//! `explain` of a placement.

use serde_json::Value;

use super::{Client, ClientError, REQUEST_TIMEOUT};

/// The field manager relayctl applies as.
pub const FIELD_MANAGER: &str = "relayctl";

/// A resource as discovery describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// `""` for the core group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The plural name in URLs.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Resource {
    /// The URL path of the collection (in `namespace` if namespaced).
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match (self.namespaced, namespace) {
            (true, Some(namespace)) => format!("{base}/namespaces/{namespace}/{}", self.plural),
            _ => format!("{base}/{}", self.plural),
        }
    }
}

impl Client {
    /// Finds the resource serving `kind` in `api_version` through discovery.
    pub async fn resource_for(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Resource, ClientError> {
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), api_version.to_string()),
        };
        let path = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let list = self.get_json(&path).await?;
        let found = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|resource| {
                resource["kind"] == kind
                    && resource["name"]
                        .as_str()
                        .is_some_and(|name| !name.contains('/'))
            })
            .ok_or_else(|| ClientError::Api {
                code: 404,
                reason: "NotFound".into(),
                message: format!("the server has no resource for kind {kind:?} in {api_version:?}"),
            })?;
        Ok(Resource {
            group,
            version,
            plural: found["name"].as_str().unwrap_or_default().to_string(),
            namespaced: found["namespaced"].as_bool().unwrap_or(false),
        })
    }

    /// Server-side applies `object` as relayctl (taking ownership of
    /// conflicting fields, as `kubectl apply --server-side --force-conflicts`
    /// would): creates it or merges it into the stored one.
    pub async fn apply(
        &self,
        object: &Value,
        default_namespace: &str,
    ) -> Result<Value, ClientError> {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
        let api_version = text(&object["apiVersion"]);
        let kind = text(&object["kind"]);
        let name = text(&object["metadata"]["name"]);
        if name.is_empty() {
            return Err(ClientError::Decode(format!(
                "a {kind} without metadata.name"
            )));
        }
        let resource = self.resource_for(&api_version, &kind).await?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(default_namespace)
            .to_string();
        let mut object = object.clone();
        if resource.namespaced {
            object["metadata"]["namespace"] = Value::from(namespace.as_str());
        }
        let path = format!(
            "{}/{name}?fieldManager={FIELD_MANAGER}&force=true",
            resource.collection_path(Some(&namespace))
        );
        let body =
            serde_json::to_vec(&object).map_err(|error| ClientError::Decode(error.to_string()))?;
        let request = self
            .http
            .patch(self.url(&path))
            .header("Content-Type", "application/apply-patch+yaml")
            .body(body)
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    /// A `meta.k8s.io/v1` Table of a resource (as `kubectl get` asks for).
    pub async fn table(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<Value, ClientError> {
        self.get_pages(
            &resource.collection_path(namespace),
            Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
        )
        .await
    }

    /// The objects of a resource, as a Kubernetes List.
    pub async fn list_resource(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<Value, ClientError> {
        self.get_pages(&resource.collection_path(namespace), None)
            .await
    }

    /// Why placement `namespace/name` resolved to the clusters it did.
    pub async fn explain(&self, namespace: &str, name: &str) -> Result<Value, ClientError> {
        self.get_json(&format!("/relaymesh/v1alpha1/explain/{namespace}/{name}"))
            .await
    }
}

/// Renders a Table like kubectl: upper-case headers of the priority-0
/// columns, cells left-aligned; with `namespaces`, a NAMESPACE column first
/// (from each row's object metadata), as `kubectl get -A` prints.
pub fn render_table(table: &Value, namespaces: bool) -> String {
    render_table_as(
        table,
        &TableView {
            namespaces,
            ..TableView::default()
        },
    )
}

/// How `kubectl get` would show a Table: which columns beyond the default
/// ones, as its flags ask.
#[derive(Debug, Clone, Default)]
pub struct TableView {
    /// A NAMESPACE column first (`-A`).
    pub namespaces: bool,
    /// The columns of priority above 0 too (`-o wide`).
    pub wide: bool,
    /// A LABELS column last (`--show-labels`).
    pub show_labels: bool,
    /// A column per label key, its value in each row (`-L KEY`).
    pub label_columns: Vec<String>,
}

/// [`render_table`] with `view`'s columns, as `kubectl get -o wide
/// --show-labels -L KEY` prints them; the labels come from each row's
/// object metadata.
pub fn render_table_as(table: &Value, view: &TableView) -> String {
    let namespaces = view.namespaces;
    let columns: Vec<(usize, String)> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, column)| view.wide || column["priority"].as_u64().unwrap_or(0) == 0)
        .map(|(index, column)| {
            (
                index,
                column["name"].as_str().unwrap_or_default().to_uppercase(),
            )
        })
        .collect();
    let mut header: Vec<String> = columns.iter().map(|(_, name)| name.clone()).collect();
    if namespaces {
        header.insert(0, "NAMESPACE".into());
    }
    header.extend(view.label_columns.iter().map(|key| key.to_uppercase()));
    if view.show_labels {
        header.push("LABELS".into());
    }
    let mut rows: Vec<Vec<String>> = vec![header];
    for row in table["rows"].as_array().into_iter().flatten() {
        let cells = row["cells"].as_array().cloned().unwrap_or_default();
        let mut line: Vec<String> = columns
            .iter()
            .map(|(index, _)| match cells.get(*index) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None => "<none>".into(),
                Some(other) => other.to_string(),
            })
            .collect();
        if namespaces {
            let namespace = row["object"]["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            line.insert(0, namespace.to_string());
        }
        let labels = &row["object"]["metadata"]["labels"];
        for key in &view.label_columns {
            line.push(
                labels[key.as_str()]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        if view.show_labels {
            let pairs: Vec<String> = labels
                .as_object()
                .into_iter()
                .flatten()
                .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
                .collect();
            line.push(if pairs.is_empty() {
                "<none>".into()
            } else {
                pairs.join(",")
            });
        }
        rows.push(line);
    }
    render_rows(&rows)
}

/// Left-aligned columns three spaces apart, as kubectl prints them; the
/// first row is the header.
pub fn render_rows(rows: &[Vec<String>]) -> String {
    let width = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..width)
        .map(|i| {
            rows.iter()
                .map(|row| row.get(i).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(line.join("   ").trim_end());
        text.push('\n');
    }
    text
}

/// Renders `relayctl explain` output: the placement's selection, each
/// selected cluster with its path and reason (and those kept until their
/// replacement is ready), then the share each relay gave each child, and
/// the relays that did not answer.
pub fn render_explanation(explanation: &Value) -> String {
    let mut text = String::new();
    let line = |value: &Value| {
        value
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string())
    };
    text.push_str(&format!("Placement: {}\n", line(&explanation["placement"])));
    text.push_str(&format!("Selects:   {}\n", line(&explanation["selects"])));
    text.push_str(&format!(
        "Clusters:  {} selected of {} matching\n",
        explanation["selected"].as_u64().unwrap_or(0),
        explanation["matching"].as_u64().unwrap_or(0)
    ));
    let cluster_line = |cluster: &Value| {
        let mut reason = line(&cluster["reason"]);
        if let Some(revision) = cluster["revision"].as_str() {
            reason.push_str(&format!(" (rollout: {revision} revision)"));
        }
        format!(
            "  {:<20} {:<40} {reason}\n",
            line(&cluster["name"]),
            line(&cluster["path"]),
        )
    };
    for cluster in explanation["clusters"].as_array().into_iter().flatten() {
        text.push_str(&cluster_line(cluster));
    }
    let leaving = explanation["leaving"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !leaving.is_empty() {
        text.push_str("Leaving:\n");
        for cluster in &leaving {
            text.push_str(&cluster_line(cluster));
        }
    }
    let quotas = explanation["quotas"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !quotas.is_empty() {
        text.push_str("Quotas:\n");
        for quota in quotas {
            text.push_str(&format!(
                "  {:<20} {}\n",
                line(&quota["relay"]),
                line(&quota["share"])
            ));
        }
    }
    for relay in explanation["unanswered"].as_array().into_iter().flatten() {
        text.push_str(&format!(
            "Not answered: {}: {} (its subtree is not shown)\n",
            line(&relay["relay"]),
            line(&relay["reason"])
        ));
    }
    if let Some(count) = explanation["notAsked"].as_u64() {
        text.push_str(&format!(
            "Not asked: {count} more relays (explain asks at most {} relays)\n",
            crate::placement::MAX_RELAYS_ASKED
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_and_tables() {
        let deployments = Resource {
            group: "apps".into(),
            version: "v1".into(),
            plural: "deployments".into(),
            namespaced: true,
        };
        assert_eq!(
            deployments.collection_path(Some("shop")),
            "/apis/apps/v1/namespaces/shop/deployments"
        );
        let namespaces = Resource {
            group: String::new(),
            version: "v1".into(),
            plural: "namespaces".into(),
            namespaced: false,
        };
        assert_eq!(namespaces.collection_path(Some("x")), "/api/v1/namespaces");
        let table = json!({
            "columnDefinitions": [{"name": "Name", "priority": 0}, {"name": "Wide", "priority": 1}, {"name": "Age", "priority": 0}],
            "rows": [{"cells": ["web", "w", "5m"]}, {"cells": ["database-1", "w", null]}],
        });
        assert_eq!(
            render_table(&table, false),
            "NAME         AGE\nweb          5m\ndatabase-1   <none>\n"
        );
        let with_object = json!({
            "columnDefinitions": [{"name": "Name", "priority": 0}],
            "rows": [{"cells": ["web"], "object": {"metadata": {"namespace": "shop"}}}],
        });
        assert_eq!(
            render_table(&with_object, true),
            "NAMESPACE   NAME\nshop        web\n"
        );
        // -o wide --show-labels -L region, as kubectl prints them.
        let clusters = json!({
            "columnDefinitions": [{"name": "Name", "priority": 0}, {"name": "Cordoned", "priority": 1}],
            "rows": [
                {"cells": ["edge-1", false], "object": {"metadata": {"labels": {"region": "eu", "tier": "edge"}}}},
                {"cells": ["edge-2", true], "object": {"metadata": {}}},
            ],
        });
        let view = TableView {
            wide: true,
            show_labels: true,
            label_columns: vec!["region".into()],
            ..TableView::default()
        };
        assert_eq!(
            render_table_as(&clusters, &view),
            "NAME     CORDONED   REGION   LABELS\n\
             edge-1   false      eu       region=eu,tier=edge\n\
             edge-2   true                <none>\n"
        );
    }
}
