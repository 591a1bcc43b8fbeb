//! One cluster's live copy, asked on demand: the `clusters/NAME/object` and
//! `clusters/NAME/events` subresources.
//!
//! The request's parameters become a [`Query`] routed down the tree to the
//! cluster's agent (`Backend::observe`); its answer, the JSON the agent
//! read, is wrapped in a `ClusterObject` or `ClusterEvents` that says which
//! cluster answered and, when a relay answered from memory because the
//! agent was out of reach, that it is stale and how old.

use relaymesh_apiserver::query::Query as Parameters;
use relaymesh_apiserver::ApiError;
use relaymesh_protocol::query::{Observation, Query, MAX_EVENTS};
use serde_json::{json, Value};

use super::VERSION;
use crate::placement::RELAYMESH_GROUP;

/// How many events `clusters/NAME/events` asks for without `limit`.
pub(super) const DEFAULT_EVENTS: u32 = 100;

/// The longest value a parameter may have (a Kubernetes name is at most
/// 253 characters).
const MAX_PARAMETER_LEN: usize = 253;

/// The [`Query::Object`] the parameters of `GET .../clusters/NAME/object`
/// ask: `kind` and `version` required, `group` (empty for the core group),
/// `namespace` and `name` optional; without `name`, every object of the
/// kind the agent manages (in `namespace`, or everywhere), as a `List`.
pub(super) fn object_query(query: Option<&str>) -> Result<Query, ApiError> {
    let parameters = Parameters::parse(query)?;
    let required = |key: &str| {
        parameter(&parameters, key)?
            .ok_or_else(|| ApiError::BadRequest(format!("the query parameter {key} is required")))
    };
    Ok(Query::Object {
        group: parameter(&parameters, "group")?.unwrap_or_default(),
        version: required("version")?,
        kind: required("kind")?,
        namespace: parameter(&parameters, "namespace")?.filter(|namespace| !namespace.is_empty()),
        name: parameter(&parameters, "name")?.unwrap_or_default(),
    })
}

/// The [`Query::Events`] the parameters of `GET .../clusters/NAME/events`
/// ask: `namespace` and `limit` optional.
pub(super) fn events_query(query: Option<&str>) -> Result<Query, ApiError> {
    let parameters = Parameters::parse(query)?;
    let limit = match parameter(&parameters, "limit")? {
        None => DEFAULT_EVENTS,
        Some(limit) => limit
            .parse::<u32>()
            .ok()
            .filter(|limit| (1..=MAX_EVENTS).contains(limit))
            .ok_or_else(|| ApiError::Invalid {
                field: "limit".into(),
                message: format!("Invalid value: {limit:?}: a number from 1 to {MAX_EVENTS}"),
            })?,
    };
    Ok(Query::Events {
        namespace: parameter(&parameters, "namespace")?.filter(|namespace| !namespace.is_empty()),
        limit,
    })
}

/// The `ClusterObject` (or, for `events`, `ClusterEvents`) made of what
/// `cluster` answered.
pub(super) fn reply(
    cluster: &str,
    events: bool,
    observation: &Observation,
) -> Result<Value, ApiError> {
    let json: Value = serde_json::from_slice(&observation.json).map_err(|error| {
        ApiError::Internal(format!(
            "{cluster} answered with JSON that does not parse: {error}"
        ))
    })?;
    let (kind, field) = match events {
        true => ("ClusterEvents", "items"),
        false => ("ClusterObject", "object"),
    };
    let mut reply = json!({
        "apiVersion": format!("{RELAYMESH_GROUP}/{VERSION}"),
        "kind": kind,
        "metadata": {"name": cluster},
        "cluster": observation.cluster,
        "stale": observation.age_ms.is_some(),
    });
    if let Some(age_ms) = observation.age_ms {
        reply["ageSeconds"] = json!(age_ms / 1000);
    }
    reply[field] = json;
    Ok(reply)
}

fn parameter(parameters: &Parameters, key: &str) -> Result<Option<String>, ApiError> {
    match parameters.get(key) {
        Some(value) if value.len() > MAX_PARAMETER_LEN => Err(ApiError::Invalid {
            field: key.into(),
            message: format!("longer than {MAX_PARAMETER_LEN} characters"),
        }),
        other => Ok(other.map(str::to_string)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_become_the_query() {
        let query = object_query(Some(
            "group=apps&version=v1&kind=Deployment&namespace=shop&name=web",
        ));
        assert_eq!(
            query.expect("valid"),
            Query::Object {
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                namespace: Some("shop".into()),
                name: "web".into(),
            }
        );
        let core = object_query(Some("version=v1&kind=ConfigMap&name=c&namespace="));
        assert!(
            matches!(core, Ok(Query::Object { group, namespace: None, .. }) if group.is_empty())
        );
        // Without a name: a list of the kind.
        assert!(matches!(
            object_query(Some("version=v1&kind=Deployment")),
            Ok(Query::Object { name, .. }) if name.is_empty()
        ));
        assert!(object_query(Some("version=v1&name=web")).is_err());
        let long = format!("version=v1&kind=K&name={}", "n".repeat(300));
        assert!(object_query(Some(&long)).is_err());

        assert_eq!(
            events_query(None).expect("valid"),
            Query::Events {
                namespace: None,
                limit: DEFAULT_EVENTS
            }
        );
        assert!(events_query(Some("limit=0")).is_err());
        assert!(events_query(Some("limit=100000")).is_err());
    }

    #[test]
    fn a_stale_answer_says_so_with_its_age() {
        let observation = Observation {
            cluster: "edge-1".into(),
            json: br#"{"kind":"Deployment"}"#.to_vec(),
            age_ms: Some(42_500),
        };
        let object = reply("edge-1", false, &observation).expect("valid");
        assert_eq!(object["kind"], "ClusterObject");
        assert_eq!(object["stale"], true);
        assert_eq!(object["ageSeconds"], 42);
        assert_eq!(object["object"]["kind"], "Deployment");

        let live = Observation {
            json: b"[]".to_vec(),
            age_ms: None,
            ..observation
        };
        let events = reply("edge-1", true, &live).expect("valid");
        assert_eq!(
            (events["kind"].as_str(), events["stale"].as_bool()),
            (Some("ClusterEvents"), Some(false))
        );
        assert!(events.get("ageSeconds").is_none());
        assert_eq!(events["items"], json!([]));
    }
}
