//! Cluster labels given on the command line (`--labels k=v,k2=v2`), checked
//! against Kubernetes' label syntax so they can be selected on at the root.

use std::collections::BTreeMap;

/// Why a label was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// An item was not `key=value`.
    #[error("label {0:?} is not key=value")]
    NotPair(String),
    /// The key is not a valid Kubernetes label key.
    #[error("label key {0:?} must be an optional DNS prefix and '/', then 1-63 characters of [A-Za-z0-9-_.] starting and ending alphanumeric")]
    BadKey(String),
    /// The value is not a valid Kubernetes label value.
    #[error("label value {0:?} must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric")]
    BadValue(String),
}

/// Parses `k=v,k2=v2` (empty text gives no labels).
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, LabelError> {
    let mut labels = BTreeMap::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| LabelError::NotPair(item.to_string()))?;
        if !valid_key(key) {
            return Err(LabelError::BadKey(key.to_string()));
        }
        if !valid_value(value) {
            return Err(LabelError::BadValue(value.to_string()));
        }
        labels.insert(key.to_string(), value.to_string());
    }
    Ok(labels)
}

fn valid_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|prefix| {
        !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    prefix_ok && !name.is_empty() && valid_value(name)
}

fn valid_value(value: &str) -> bool {
    let body_ok = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends_ok = value.is_empty()
        || (value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    value.len() <= 63 && body_ok && ends_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let labels = parse("region=eu, tier=edge,example.com/site=f-1,empty=").ok();
        assert_eq!(labels.map(|l| l.len()), Some(4));
        assert_eq!(parse("").ok(), Some(BTreeMap::new()));
        assert!(matches!(parse("region"), Err(LabelError::NotPair(_))));
        assert!(matches!(parse("-x=1"), Err(LabelError::BadKey(_))));
        assert!(matches!(parse("x=a b"), Err(LabelError::BadValue(_))));
        assert!(matches!(
            parse(&format!("x={}", "a".repeat(64))),
            Err(LabelError::BadValue(_))
        ));
    }
}
