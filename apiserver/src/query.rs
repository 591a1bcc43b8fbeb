//! Query strings: `application/x-www-form-urlencoded` pairs, decoded.
//!
//! The Kubernetes API carries much in the query (`labelSelector`, `watch`,
//! `resourceVersion`, `fieldManager`, ...), so this is its own small module
//! rather than a line in a handler.

use super::ApiError;

/// The decoded `key=value` pairs of a query string, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `query` (the part after `?`, if any).
    pub fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let mut pairs = Vec::new();
        for pair in query.unwrap_or_default().split('&') {
            if pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            pairs.push((decode(key)?, decode(value)?));
        }
        Ok(Self { pairs })
    }

    /// Every value of `key`, in order (`?exclude=a&exclude=b`).
    pub(super) fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(candidate, _)| candidate == key)
            .map(|(_, value)| value.as_str())
    }

    /// The value of the first `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(candidate, _)| candidate == key)
            .map(|(_, value)| value.as_str())
    }
}

/// Decodes `+` and `%XX` escapes; the result must be UTF-8.
fn decode(text: &str) -> Result<String, ApiError> {
    let malformed = || ApiError::BadRequest(format!("malformed query parameter {text:?}"));
    let mut bytes = Vec::with_capacity(text.len());
    let mut input = text.bytes();
    while let Some(byte) = input.next() {
        match byte {
            b'+' => bytes.push(b' '),
            b'%' => {
                let high = input.next().and_then(hex_value).ok_or_else(malformed)?;
                let low = input.next().and_then(hex_value).ok_or_else(malformed)?;
                bytes.push(high << 4 | low);
            }
            other => bytes.push(other),
        }
    }
    String::from_utf8(bytes).map_err(|_| malformed())
}

/// The value of one hex digit.
fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_pairs() {
        let query = Query::parse(Some("name=demo&labelSelector=app%3Dweb%2Ctier+in+(a)&flag"))
            .expect("a well-formed query");
        assert_eq!(query.get("name"), Some("demo"));
        assert_eq!(query.get("labelSelector"), Some("app=web,tier in (a)"));
        assert_eq!(query.get("flag"), Some(""));
        assert_eq!(query.get("missing"), None);
        assert_eq!(Query::parse(None).expect("no query").get("name"), None);
    }

    #[test]
    fn first_value_wins() {
        let query = Query::parse(Some("name=a&name=b")).expect("a well-formed query");
        assert_eq!(query.get("name"), Some("a"));
    }

    #[test]
    fn refuses_malformed_escapes() {
        for bad in ["name=%", "name=%4", "name=%zz", "name=%ff"] {
            assert!(
                matches!(Query::parse(Some(bad)), Err(ApiError::BadRequest(_))),
                "{bad}"
            );
        }
    }
}
