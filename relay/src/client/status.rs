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
/// the failing clusters and the conditions, flat.
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
    json!({
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
        "failing": status.get("failing").cloned().unwrap_or_else(|| json!([])),
        "conditions": {
            "Applied": condition("Applied"),
            "Ready": condition("Ready"),
            "Degraded": condition("Degraded"),
        },
    })
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
}
