//! `relayctl status`: how placements are doing, from the status the root
//! writes on each Placement (docs/api.md, "Placement status").

use serde_json::{json, Value};

use super::{Client, ClientError, GROUP_PATH};

impl Client {
    /// Placement `name` in `namespace`, or every Placement of `namespace`
    /// (of every namespace if `None`), sorted by namespace and name.
    pub async fn placements(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<Value>, ClientError> {
        let base = match namespace {
            Some(namespace) => format!("{GROUP_PATH}/namespaces/{namespace}/placements"),
            None => format!("{GROUP_PATH}/placements"),
        };
        if let Some(name) = name {
            return Ok(vec![self.get_json(&format!("{base}/{name}")).await?]);
        }
        let mut list = self.get_pages(&base, None).await?;
        let mut items = match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let key = |item: &Value| {
            let text = |field: &str| item["metadata"][field].as_str().unwrap_or("").to_string();
            (text("namespace"), text("name"))
        };
        items.sort_by_key(key);
        Ok(items)
    }
}

/// One placement's status as `relayctl status -o json` prints it: counts,
/// the failing clusters, the conditions, the status rules' results and the
/// phase counts per group label, flat.
pub fn summary(placement: &Value) -> Value {
    let status = &placement["status"];
    let clusters = &status["clusters"];
    let count = |field: &str| clusters[field].as_u64().unwrap_or(0);
    let condition = |kind: &str| {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|condition| condition["type"] == kind)
            .map_or(Value::Null, |condition| condition["status"].clone())
    };
    let mut summary = json!({
        "namespace": placement["metadata"]["namespace"],
        "name": placement["metadata"]["name"],
        "generation": placement["metadata"]["generation"],
        "observedGeneration": status["observedGeneration"],
        "selected": count("selected"),
        "pending": count("pending"),
        "applied": count("applied"),
        "ready": count("ready"),
        "failed": count("failed"),
        "offline": count("offline"),
        "updated": count("updated"),
        "failing": status.get("failing").cloned().unwrap_or_else(|| json!([])),
        "conditions": {
            "Applied": condition("Applied"),
            "Ready": condition("Ready"),
            "Degraded": condition("Degraded"),
        },
    });
    for field in ["revision", "rules", "groups", "rollout"] {
        if let Some(value) = status.get(field) {
            summary[field] = value.clone();
        }
    }
    summary
}

/// Why `relayctl status --by LABEL` cannot answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// The placement does not group its status by the label.
    #[error(
        "placement {placement} does not group its status by {label:?}: add it to \
         spec.statusGroupBy (the tree sums per group only the labels a placement names)"
    )]
    NotGrouped {
        /// `namespace/name`.
        placement: String,
        /// The label asked for.
        label: String,
    },
}

/// The labels a Placement the API served groups its status by
/// (`spec.statusGroupBy`), as the user wrote them: what `--by` may name.
pub fn grouped_by(placement: &Value) -> Vec<String> {
    placement["spec"]["statusGroupBy"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The rows of `summary`'s groups by `label` (each with `key` or `other`,
/// `clusters`, `ready`, `failed`).
pub fn groups_by<'a>(summary: &'a Value, label: &str) -> Result<&'a [Value], GroupError> {
    summary["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|groups| groups["label"] == label)
        .and_then(|groups| groups["groups"].as_array())
        .map(Vec::as_slice)
        .ok_or_else(|| GroupError::NotGrouped {
            placement: format!(
                "{}/{}",
                summary["namespace"].as_str().unwrap_or(""),
                summary["name"].as_str().unwrap_or("")
            ),
            label: label.to_string(),
        })
}

/// The summaries grouped by `label`: a line per placement and group.
pub fn render_groups(summaries: &[Value], label: &str) -> Result<String, GroupError> {
    let mut text = format!(
        "{:<12} {:<24} {:<16} {:>7} {:>7}\n",
        "NAMESPACE",
        "PLACEMENT",
        label.to_uppercase(),
        "READY",
        "FAILED"
    );
    for summary in summaries {
        for group in groups_by(summary, label)? {
            let count = |field: &str| group[field].as_u64().unwrap_or(0);
            let key = match group["key"].as_str() {
                Some("") => "(none)".to_string(),
                Some(key) => key.to_string(),
                None => "(others)".to_string(),
            };
            text.push_str(&format!(
                "{:<12} {:<24} {:<16} {:>7} {:>7}\n",
                summary["namespace"].as_str().unwrap_or(""),
                summary["name"].as_str().unwrap_or(""),
                key,
                format!("{}/{}", count("ready"), count("clusters")),
                count("failed"),
            ));
        }
    }
    Ok(text)
}

/// The summaries as a table, each placement's failing clusters below it.
pub fn render_text(summaries: &[Value]) -> String {
    let mut text = format!(
        "{:<12} {:<24} {:>7} {:>8} {:>7} {:>8} {:>7}\n",
        "NAMESPACE", "PLACEMENT", "READY", "APPLIED", "FAILED", "OFFLINE", "PENDING"
    );
    for summary in summaries {
        let count = |field: &str| summary[field].as_u64().unwrap_or(0);
        let ready = format!("{}/{}", count("ready"), count("selected"));
        text.push_str(&format!(
            "{:<12} {:<24} {:>7} {:>8} {:>7} {:>8} {:>7}\n",
            summary["namespace"].as_str().unwrap_or(""),
            summary["name"].as_str().unwrap_or(""),
            ready,
            count("applied"),
            count("failed"),
            count("offline"),
            count("pending"),
        ));
        for failing in summary["failing"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "  failed  {}: {}\n",
                failing["cluster"].as_str().unwrap_or("?"),
                failing["message"].as_str().unwrap_or("")
            ));
        }
        let named = summary["failing"].as_array().map_or(0, Vec::len) as u64;
        if count("failed") > named {
            text.push_str(&format!(
                "  … and {} more failed\n",
                count("failed") - named
            ));
        }
        for rule in summary["rules"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "  rule {} ({}): {}\n",
                rule["name"].as_str().unwrap_or("?"),
                rule["aggregate"].as_str().unwrap_or("?"),
                rule_value(rule),
            ));
        }
    }
    text
}

/// A rule's result for people: its value, or its top list, and its groups.
fn rule_value(rule: &Value) -> String {
    let value = |entry: &Value| match &entry["value"] {
        Value::Null => "-".to_string(),
        value => value.to_string(),
    };
    let mut text = match rule["top"].as_array() {
        Some(top) if rule["aggregate"] == "topk" => top
            .iter()
            .map(|entry| {
                format!(
                    "{} {}",
                    entry["cluster"].as_str().unwrap_or("?"),
                    value(entry)
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => value(rule),
    };
    let groups: Vec<String> = rule["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|group| format!("{}={}", group["key"].as_str().unwrap_or(""), value(group)))
        .collect();
    if !groups.is_empty() {
        text.push_str(&format!(" ({})", groups.join(", ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placement_summarises_flat_and_renders_its_failures() {
        let placement = json!({
            "metadata": {"namespace": "shop", "name": "storefront", "generation": 2},
            "status": {
                "observedGeneration": 2,
                "clusters": {"selected": 20, "pending": 0, "applied": 0, "ready": 17, "failed": 3, "offline": 0},
                "failing": [{"cluster": "e03", "message": "Deployment shop/web: no image"}],
                "conditions": [{"type": "Ready", "status": "False"}, {"type": "Degraded", "status": "True"}],
            },
        });
        let summary = summary(&placement);
        assert_eq!(
            (summary["ready"].as_u64(), summary["failed"].as_u64()),
            (Some(17), Some(3))
        );
        assert_eq!(summary["conditions"]["Ready"], "False");
        assert_eq!(summary["conditions"]["Applied"], Value::Null);
        let text = render_text(&[summary]);
        assert!(
            text.contains("shop         storefront                 17/20"),
            "{text}"
        );
        assert!(
            text.contains("  failed  e03: Deployment shop/web: no image\n"),
            "{text}"
        );
        assert!(text.contains("  … and 2 more failed\n"), "{text}");
    }

    #[test]
    fn rules_and_groups_are_shown() {
        let placement = json!({
            "metadata": {"namespace": "shop", "name": "web"},
            "status": {
                "clusters": {"selected": 3, "ready": 2, "failed": 1},
                "rules": [{"name": "ready", "aggregate": "sum", "value": 5, "count": 3,
                           "groups": [{"key": "eu", "value": 3, "count": 2}, {"key": "us", "value": 2, "count": 1}]}],
                "groups": [{"label": "region", "groups": [
                    {"key": "eu", "clusters": 2, "ready": 1, "failed": 1},
                    {"key": "", "clusters": 1, "ready": 1, "failed": 0}]}],
            },
        });
        let summary = summary(&placement);
        let text = render_text(std::slice::from_ref(&summary));
        assert!(
            text.contains("  rule ready (sum): 5 (eu=3, us=2)\n"),
            "{text}"
        );
        let grouped = render_groups(std::slice::from_ref(&summary), "region").expect("grouped");
        assert!(
            grouped
                .contains("shop         web                      eu                   1/2       1"),
            "{grouped}"
        );
        assert!(grouped.contains("(none)"), "{grouped}");
        let error = render_groups(&[summary], "zone").expect_err("not grouped by zone");
        assert!(error.to_string().contains("spec.statusGroupBy"), "{error}");
    }
}
