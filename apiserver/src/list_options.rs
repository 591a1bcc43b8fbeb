//! What `resourceVersion`, `resourceVersionMatch` and `sendInitialEvents`
//! ask of a list or a watch, checked as kube-apiserver checks them
//! (`k8s.io/apimachinery/pkg/apis/meta/internalversion/validation`). No IO.

use super::query::Query;
use super::ApiError;

/// Which state of the store a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListAt {
    /// The current state (no version, `"0"`, or `NotOlderThan` a version
    /// the store has reached).
    Current,
    /// The state at exactly this version (`resourceVersionMatch=Exact`).
    Exact(u64),
}

/// Reads the list options of `query` against a store now at `current`.
pub(super) fn list_at(query: &Query, current: u64) -> Result<ListAt, ApiError> {
    let version = query.get("resourceVersion").filter(|v| !v.is_empty());
    let matching = query.get("resourceVersionMatch").filter(|m| !m.is_empty());
    let continued = query.get("continue").is_some_and(|token| !token.is_empty());
    if matching.is_some() && continued {
        return Err(invalid(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden when continue is provided",
        ));
    }
    let parsed = match version {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::BadRequest(format!("invalid resourceVersion {text:?}: not a number"))
        })?),
    };
    let too_large = |version: u64| {
        ApiError::Timeout(format!(
            "Too large resource version: {version}, current: {current}"
        ))
    };
    match (matching, parsed) {
        (Some(_), None) => Err(invalid(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (None, None) | (None, Some(0)) | (Some("NotOlderThan"), Some(0)) => Ok(ListAt::Current),
        (None, Some(version)) | (Some("NotOlderThan"), Some(version)) => {
            if version > current {
                Err(too_large(version))
            } else {
                Ok(ListAt::Current)
            }
        }
        (Some("Exact"), Some(0)) => Err(invalid(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        )),
        (Some("Exact"), Some(version)) if version > current => Err(too_large(version)),
        (Some("Exact"), Some(version)) => Ok(ListAt::Exact(version)),
        (Some(other), Some(_)) => Err(invalid(
            "resourceVersionMatch",
            &format!("Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""),
        )),
    }
}

/// Whether a watch asks for its initial events followed by a bookmark that
/// marks their end (`sendInitialEvents=true`), which kube-apiserver allows
/// only with `resourceVersionMatch=NotOlderThan` and bookmarks.
pub(super) fn sends_initial_events(query: &Query) -> Result<Option<bool>, ApiError> {
    let send = match query.get("sendInitialEvents") {
        None | Some("") => return Ok(None),
        Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "invalid sendInitialEvents {other:?}: true or false"
            )))
        }
    };
    if query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(invalid(
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if send && query.get("allowWatchBookmarks") != Some("true") {
        return Err(invalid(
            "allowWatchBookmarks",
            "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true",
        ));
    }
    Ok(Some(send))
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::Invalid {
        field: field.to_string(),
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, current: u64) -> Result<ListAt, ApiError> {
        list_at(&Query::parse(Some(text)).expect("parses"), current)
    }

    #[test]
    fn list_versions_as_kube_apiserver_reads_them() {
        assert_eq!(at("", 9).expect("current"), ListAt::Current);
        assert_eq!(at("resourceVersion=0", 9).expect("any"), ListAt::Current);
        assert_eq!(
            at("resourceVersion=5", 9).expect("not older"),
            ListAt::Current
        );
        assert_eq!(
            at("resourceVersion=5&resourceVersionMatch=Exact", 9).expect("exact"),
            ListAt::Exact(5)
        );
        assert!(matches!(
            at("resourceVersion=10&resourceVersionMatch=NotOlderThan", 9),
            Err(ApiError::Timeout(_))
        ));
        for refused in [
            "resourceVersionMatch=Exact",
            "resourceVersion=0&resourceVersionMatch=Exact",
            "resourceVersion=5&resourceVersionMatch=Newest",
            "resourceVersion=5&resourceVersionMatch=Exact&continue=abc",
        ] {
            assert!(
                matches!(at(refused, 9), Err(ApiError::Invalid { .. })),
                "{refused}"
            );
        }
        assert!(matches!(
            at("resourceVersion=x", 9),
            Err(ApiError::BadRequest(_))
        ));
    }

    #[test]
    fn initial_events_need_not_older_than_and_bookmarks() {
        let send = |text: &str| sends_initial_events(&Query::parse(Some(text)).expect("parses"));
        assert_eq!(send("watch=1").expect("unset"), None);
        assert_eq!(
            send(
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
            )
            .expect("valid"),
            Some(true)
        );
        assert!(send("sendInitialEvents=true&allowWatchBookmarks=true").is_err());
        assert!(send("sendInitialEvents=true&resourceVersionMatch=NotOlderThan").is_err());
        assert_eq!(
            send("sendInitialEvents=false&resourceVersionMatch=NotOlderThan").expect("valid"),
            Some(false)
        );
    }
}
