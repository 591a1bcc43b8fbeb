//! `relayctl watch`: whether a placement is done, failed or still under
//! way, judged from its status summary ([`super::status::summary`]), so a
//! script can wait on it.

use serde_json::Value;

/// Where a placement stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every selected cluster is ready (the `Ready` condition is `True`)
    /// for the spec the root placed last.
    Ready,
    /// Every selected cluster runs the newest revision, none is still on
    /// its way (none pending, applying or offline), and some failed:
    /// waiting longer will not make it ready. The text names them.
    Failed(String),
    /// Still under way.
    Waiting,
}

/// The verdict on a placement's `summary`.
pub fn verdict(summary: &Value) -> Verdict {
    let count = |field: &str| summary[field].as_u64().unwrap_or(0);
    // A status about an older spec says nothing about this one.
    let current =
        summary["generation"].is_null() || summary["observedGeneration"] == summary["generation"];
    if !current {
        return Verdict::Waiting;
    }
    if summary["conditions"]["Ready"] == "True" {
        return Verdict::Ready;
    }
    let under_way = count("pending") + count("applied") + count("offline");
    // Failures on an older revision say nothing of the newest, which may
    // be the fix on its way.
    let all_updated = count("updated") >= count("selected");
    if count("failed") > 0 && under_way == 0 && all_updated && count("selected") > 0 {
        let names: Vec<String> = summary["failing"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|failing| {
                format!(
                    "{}: {}",
                    failing["cluster"].as_str().unwrap_or("?"),
                    failing["message"].as_str().unwrap_or("")
                )
            })
            .collect();
        let text = format!(
            "{} of {} clusters failed: {}",
            count("failed"),
            count("selected"),
            names.join("; ")
        );
        return Verdict::Failed(text);
    }
    Verdict::Waiting
}

/// One line of progress, as `relayctl watch` prints it when its output is
/// not a terminal (and as the progress bar's message when it is).
pub fn progress_line(summary: &Value) -> String {
    let count = |field: &str| summary[field].as_u64().unwrap_or(0);
    format!(
        "{}/{} ready, {} on the newest revision, {} applying, {} pending, {} failed, {} offline",
        count("ready"),
        count("selected"),
        count("updated"),
        count("applied"),
        count("pending"),
        count("failed"),
        count("offline")
    )
}

/// One group's progress (a row of `relayctl status --by`): its name for
/// people, its ready and reporting clusters, and a line of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupProgress {
    /// The group's label value (`(none)`: clusters without the label,
    /// `(others)`: the groups past the bound).
    pub name: String,
    /// Ready clusters.
    pub ready: u64,
    /// Clusters of the group that reported.
    pub clusters: u64,
    /// `eu: 9/10 ready, 1 failed`.
    pub line: String,
}

/// The progress of each group in `rows` (as [`super::status::groups_by`]
/// returns them).
pub fn group_progress(rows: &[Value]) -> Vec<GroupProgress> {
    rows.iter()
        .map(|row| {
            let count = |field: &str| row[field].as_u64().unwrap_or(0);
            let name = match row["key"].as_str() {
                Some("") => "(none)".to_string(),
                Some(key) => key.to_string(),
                None => "(others)".to_string(),
            };
            let line = format!(
                "{name}: {}/{} ready, {} failed",
                count("ready"),
                count("clusters"),
                count("failed")
            );
            GroupProgress {
                name,
                ready: count("ready"),
                clusters: count("clusters"),
                line,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn groups_make_one_line_each() {
        let rows = [
            json!({"key": "eu", "clusters": 10, "ready": 9, "failed": 1}),
            json!({"key": "", "clusters": 1, "ready": 0, "failed": 0}),
            json!({"other": true, "clusters": 3, "ready": 3, "failed": 0}),
        ];
        let lines: Vec<String> = group_progress(&rows).into_iter().map(|g| g.line).collect();
        assert_eq!(
            lines,
            [
                "eu: 9/10 ready, 1 failed",
                "(none): 0/1 ready, 0 failed",
                "(others): 3/3 ready, 0 failed"
            ]
        );
    }

    fn summary(ready: u64, applied: u64, failed: u64, offline: u64, condition: &str) -> Value {
        json!({
            "generation": 3, "observedGeneration": 3, "selected": 20, "pending": 0,
            "ready": ready, "applied": applied, "failed": failed, "offline": offline,
            "updated": 20,
            "failing": [{"cluster": "e03", "message": "Deployment shop/web: no image"}],
            "conditions": {"Ready": condition},
        })
    }

    #[test]
    fn ready_failed_or_still_waiting() {
        assert_eq!(verdict(&summary(20, 0, 0, 0, "True")), Verdict::Ready);
        assert_eq!(verdict(&summary(15, 4, 1, 0, "False")), Verdict::Waiting);
        // An offline cluster may still come back and apply.
        assert_eq!(verdict(&summary(18, 0, 1, 1, "False")), Verdict::Waiting);
        let Verdict::Failed(text) = verdict(&summary(19, 0, 1, 0, "False")) else {
            panic!("settled with a failure");
        };
        assert_eq!(
            text,
            "1 of 20 clusters failed: e03: Deployment shop/web: no image"
        );
        // Ready, but for the spec before the last edit.
        let mut stale = summary(20, 0, 0, 0, "True");
        stale["generation"] = json!(4);
        assert_eq!(verdict(&stale), Verdict::Waiting);
        // Failed on an older revision while the newest is on its way.
        let mut fixing = summary(19, 0, 1, 0, "False");
        fixing["updated"] = json!(12);
        assert_eq!(verdict(&fixing), Verdict::Waiting);
        assert_eq!(
            progress_line(&summary(15, 4, 1, 0, "False")),
            "15/20 ready, 20 on the newest revision, 4 applying, 0 pending, 1 failed, 0 offline"
        );
    }
}
