//! `spec.rollout`: how a Placement's new revisions reach its clusters,
//! read and checked (the decisions are `crate::rollout`'s).
//!
//! ```yaml
//! rollout:
//!   strategy: Progressive       # All (default), Progressive or Canary
//!   maxConcurrency: 2           # or "25%" of the selected clusters; default 1
//!   minSuccessTime: 30s         # ready this long before a cluster counts as done; default 0s
//!   progressDeadline: 10m       # not ready this long after starting: failed; default none
//!   maxFailures: 0              # or "10%"; more failed clusters halt the rollout; default 0
//!   orderBy: carbon-intensity   # a cluster label: smallest values first
//!   canary: {groupBy: region}   # Canary: one cluster per region first (absent: one cluster)
//!   paused: false               # no new wave while true
//!   gates: [change-window]      # conditions that must be True on the Placement for a wave
//!   maxUnavailablePerGroup: {max: 1, groupBy: Relays}   # per subtree of the root's children
//!   # or {max: 1, label: zone}: per value of a cluster label
//! ```

use std::time::Duration;

use crate::rollout::{Amount, RolloutSpec, Strategy};
use serde_json::{Map, Value};

use super::error::{invalid, PlacementError};

/// How many gates a rollout may name.
pub const MAX_GATES: usize = 8;

const FIELD: &str = "spec.rollout";

/// Reads `spec.rollout` (absent: every cluster at once). A label orders,
/// groups or picks the canaries of a `maxClusters` placement too: the
/// relays split its waves by the values their children report of the
/// clusters they chose.
pub fn rollout(value: Option<&Value>) -> Result<RolloutSpec, PlacementError> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(RolloutSpec::default());
    };
    let Some(fields) = value.as_object() else {
        return Err(invalid(FIELD, "must be an object"));
    };
    const KNOWN: [&str; 10] = [
        "strategy",
        "maxConcurrency",
        "minSuccessTime",
        "progressDeadline",
        "maxFailures",
        "orderBy",
        "canary",
        "paused",
        "gates",
        "maxUnavailablePerGroup",
    ];
    if let Some(unknown) = fields.keys().find(|key| !KNOWN.contains(&key.as_str())) {
        return Err(invalid(
            format!("{FIELD}.{unknown}"),
            format!("unknown field: rollout has {}", KNOWN.join(", ")),
        ));
    }
    let strategy = match fields.get("strategy") {
        None | Some(Value::Null) => Strategy::All,
        Some(Value::String(text)) => match text.as_str() {
            "All" => Strategy::All,
            "Progressive" => Strategy::Progressive,
            "Canary" => Strategy::Canary,
            other => {
                return Err(invalid(
                    format!("{FIELD}.strategy"),
                    format!("Unsupported value: {other:?}: supported values: \"All\", \"Progressive\", \"Canary\""),
                ))
            }
        },
        Some(_) => return Err(invalid(format!("{FIELD}.strategy"), "must be a string")),
    };
    let max_concurrency = amount(fields, FIELD, "maxConcurrency")?.unwrap_or(Amount::Count(1));
    if matches!(max_concurrency, Amount::Count(0) | Amount::Percent(0)) {
        return Err(invalid(
            format!("{FIELD}.maxConcurrency"),
            "must be at least 1 (or 1%)",
        ));
    }
    let max_failures = amount(fields, FIELD, "maxFailures")?.unwrap_or(Amount::Count(0));
    let (max_unavailable_per_group, group_label) =
        per_group(fields.get("maxUnavailablePerGroup"), strategy)?;
    let min_success_time = duration(fields, "minSuccessTime")?.unwrap_or(Duration::ZERO);
    let progress_deadline = duration(fields, "progressDeadline")?;
    let order_by = label(fields.get("orderBy"), &format!("{FIELD}.orderBy"))?;
    let canary_by = match fields.get("canary") {
        None | Some(Value::Null) => None,
        Some(Value::Object(canary)) => {
            if strategy != Strategy::Canary {
                return Err(invalid(
                    format!("{FIELD}.canary"),
                    "only with strategy: Canary",
                ));
            }
            if let Some(unknown) = canary.keys().find(|key| *key != "groupBy") {
                return Err(invalid(
                    format!("{FIELD}.canary.{unknown}"),
                    "unknown field: canary has groupBy",
                ));
            }
            label(canary.get("groupBy"), &format!("{FIELD}.canary.groupBy"))?
        }
        Some(_) => return Err(invalid(format!("{FIELD}.canary"), "must be an object")),
    };
    let group_path = format!("{FIELD}.maxUnavailablePerGroup.label");
    if let (Some(group), Some(order)) = (&group_label, &order_by) {
        if group != order {
            return Err(invalid(
                group_path,
                format!("Invalid value: {group:?}: a rollout grouped by a label is ordered within each group by nothing else; orderBy must be absent or {group:?}"),
            ));
        }
    }
    let paused = match fields.get("paused") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(paused)) => *paused,
        Some(_) => return Err(invalid(format!("{FIELD}.paused"), "must be a boolean")),
    };
    let gates = match fields.get("gates") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            if items.len() > MAX_GATES {
                return Err(invalid(
                    format!("{FIELD}.gates"),
                    format!(
                        "Too many: {}: must have at most {MAX_GATES} items",
                        items.len()
                    ),
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(index, item)| match item.as_str() {
                    Some(gate) if is_condition_type(gate) => Ok(gate.to_string()),
                    _ => Err(invalid(
                        format!("{FIELD}.gates[{index}]"),
                        "must be a condition type (letters, digits, '.', '-', '_', '/'; at most 316 characters)",
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => return Err(invalid(format!("{FIELD}.gates"), "must be a list")),
    };
    Ok(RolloutSpec {
        strategy,
        max_concurrency,
        min_success_time,
        progress_deadline,
        max_failures,
        order_by,
        canary_by,
        paused,
        gates,
        max_unavailable_per_group,
        group_label,
    })
}

/// `spec.rollout.maxUnavailablePerGroup`: `{max, groupBy: Relays}` or
/// `{max, label: KEY}`; the budget and the group label, if any.
fn per_group(
    value: Option<&Value>,
    strategy: Strategy,
) -> Result<(Option<Amount>, Option<String>), PlacementError> {
    let path = format!("{FIELD}.maxUnavailablePerGroup");
    let fields = match value {
        None | Some(Value::Null) => return Ok((None, None)),
        Some(Value::Object(fields)) => fields,
        Some(_) => {
            return Err(invalid(
                path,
                "must be an object: {max, groupBy} or {max, label}",
            ))
        }
    };
    if strategy == Strategy::All {
        return Err(invalid(path, "only with strategy: Progressive or Canary"));
    }
    if let Some(unknown) = fields
        .keys()
        .find(|key| !["max", "groupBy", "label"].contains(&key.as_str()))
    {
        return Err(invalid(
            format!("{path}.{unknown}"),
            "unknown field: maxUnavailablePerGroup has max, groupBy, label",
        ));
    }
    let label = label(fields.get("label"), &format!("{path}.label"))?;
    match fields.get("groupBy") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) if text == "Relays" && label.is_none() => {}
        Some(Value::String(text)) if text == "Relays" => {
            return Err(invalid(
                format!("{path}.groupBy"),
                "groupBy: Relays and label are exclusive: groups are the root's children's subtrees or the values of a label",
            ))
        }
        Some(other) => {
            return Err(invalid(
                format!("{path}.groupBy"),
                format!("Unsupported value: {other}: supported values: \"Relays\" (the subtree of each of the root's children; for the values of a cluster label, set label instead)"),
            ))
        }
    }
    match amount(fields, &path, "max")? {
        None => Err(invalid(format!("{path}.max"), "Required value")),
        Some(Amount::Count(0) | Amount::Percent(0)) => {
            Err(invalid(format!("{path}.max"), "must be at least 1 (or 1%)"))
        }
        Some(max) => Ok((Some(max), label)),
    }
}

/// A count (`2`) or a percentage (`"25%"`) at `PREFIX.NAME`.
fn amount(
    fields: &Map<String, Value>,
    prefix: &str,
    name: &str,
) -> Result<Option<Amount>, PlacementError> {
    let path = format!("{prefix}.{name}");
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number
            .as_u64()
            .and_then(|count| u32::try_from(count).ok())
            .map(|count| Some(Amount::Count(count)))
            .ok_or_else(|| invalid(path, "must be a non-negative integer or a percentage")),
        Some(Value::String(text)) => {
            let percent = text
                .strip_suffix('%')
                .and_then(|digits| digits.parse::<u32>().ok())
                .filter(|percent| *percent <= 100);
            match percent {
                Some(percent) => Ok(Some(Amount::Percent(percent))),
                None => Err(invalid(
                    path,
                    format!("invalid value {text:?}: must be an integer or a percentage from \"0%\" to \"100%\""),
                )),
            }
        }
        Some(_) => Err(invalid(path, "must be an integer or a percentage")),
    }
}

/// A duration such as `30s` or `10m` at `spec.rollout.NAME`.
fn duration(fields: &Map<String, Value>, name: &str) -> Result<Option<Duration>, PlacementError> {
    let path = format!("{FIELD}.{name}");
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => humantime::parse_duration(text)
            .map(Some)
            .map_err(|error| invalid(path, format!("invalid duration {text:?}: {error}"))),
        Some(_) => Err(invalid(
            path,
            "must be a duration such as \"30s\" or \"10m\"",
        )),
    }
}

/// A cluster label key at `path`.
fn label(value: Option<&Value>, path: &str) -> Result<Option<String>, PlacementError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(key)) => match crate::labels::label_error(key, "") {
            None => Ok(Some(key.clone())),
            Some(error) => Err(invalid(path, error)),
        },
        Some(_) => Err(invalid(path, "must be a label key")),
    }
}

/// Whether `text` can be a condition's type (a qualified name, as
/// Kubernetes checks `metav1.Condition.type`).
fn is_condition_type(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 316
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        && text
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && text
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn error(value: Value) -> String {
        rollout(Some(&value)).expect_err("refused").to_string()
    }

    #[test]
    fn reads_per_group_budgets_and_names_what_is_wrong() {
        let spec = rollout(
            Some(&json!({"strategy": "Progressive", "maxUnavailablePerGroup": {"max": "50%", "groupBy": "Relays"}})),
        )
        .expect("valid");
        assert_eq!(spec.max_unavailable_per_group, Some(Amount::Percent(50)));
        assert_eq!(spec.group_label, None);
        let by_zone = rollout(
            Some(&json!({"strategy": "Progressive", "maxUnavailablePerGroup": {"max": 1, "label": "zone"}})),
        )
        .expect("valid");
        assert_eq!(by_zone.group_label.as_deref(), Some("zone"));
        let cases = [
            (
                json!({"strategy": "Progressive", "maxUnavailablePerGroup": {"max": 0}}),
                "maxUnavailablePerGroup.max",
            ),
            (
                json!({"strategy": "Progressive", "maxUnavailablePerGroup": {}}),
                "Required value",
            ),
            (
                json!({"strategy": "Progressive", "maxUnavailablePerGroup": {"max": 1, "groupBy": "region"}}),
                "set label instead",
            ),
            (
                json!({"strategy": "Progressive", "maxUnavailablePerGroup": {"max": 1, "label": "region", "groupBy": "Relays"}}),
                "exclusive",
            ),
            (
                json!({"strategy": "Progressive", "maxUnavailablePerGroup": {"max": 1, "label": "region"}, "orderBy": "carbon"}),
                "orderBy must be absent",
            ),
            (
                json!({"strategy": "Progressive", "maxUnavailablePerGroup": {"max": 1, "lable": "x"}}),
                "maxUnavailablePerGroup.lable",
            ),
            (
                json!({"maxUnavailablePerGroup": {"max": 1}}),
                "only with strategy",
            ),
            (
                json!({"strategy": "Progressive", "maxUnavailablePerGroup": 1}),
                "must be an object",
            ),
        ];
        for (value, expected) in cases {
            let refused = error(value.clone());
            assert!(refused.contains(expected), "{value}: {refused}");
        }
    }

    #[test]
    fn reads_a_progressive_rollout() {
        let spec = rollout(Some(&json!({
            "strategy": "Progressive",
            "maxConcurrency": "25%",
            "minSuccessTime": "30s",
            "maxFailures": 1,
            "orderBy": "carbon-intensity",
            "gates": ["change-window"],
        })))
        .expect("a valid rollout");
        assert_eq!(spec.strategy, Strategy::Progressive);
        assert_eq!(spec.max_concurrency, Amount::Percent(25));
        assert_eq!(spec.min_success_time, Duration::from_secs(30));
        assert_eq!(spec.max_failures, Amount::Count(1));
        assert_eq!(spec.order_by.as_deref(), Some("carbon-intensity"));
        assert_eq!(spec.gates, vec!["change-window".to_string()]);
        assert_eq!(
            rollout(None).expect("absent is valid"),
            RolloutSpec::default()
        );
    }

    #[test]
    fn names_the_field_at_fault() {
        assert!(error(json!({"strategy": "Blue"})).contains("spec.rollout.strategy"));
        assert!(error(json!({"maxConcurrency": 0})).contains("spec.rollout.maxConcurrency"));
        assert!(error(json!({"maxFailures": "120%"})).contains("spec.rollout.maxFailures"));
        assert!(error(json!({"minSuccessTime": "soon"})).contains("spec.rollout.minSuccessTime"));
        assert!(error(json!({"orderBy": "not a label"})).contains("spec.rollout.orderBy"));
        assert!(
            error(json!({"canary": {"groupBy": "region"}})).contains("only with strategy: Canary")
        );
        assert!(error(json!({"waves": 3})).contains("spec.rollout.waves"));
        assert!(error(json!({"gates": ["-x"]})).contains("spec.rollout.gates[0]"));
    }
}
