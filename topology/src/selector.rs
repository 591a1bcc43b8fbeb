//! Label selectors: matching a cluster's labels, and the kubectl `-l` text
//! form that relays and the root's API accept.
//!
//! Matching follows Kubernetes: every `match_labels` pair and every
//! requirement must hold; `NotIn` and `DoesNotExist` hold for an absent key;
//! the empty selector matches every label set.
//!
//! The text form is kubectl's: requirements separated by commas, each one of
//! `k=v` (or `k==v`), `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists) or
//! `!k` (does not exist). Whitespace around tokens is ignored; values may be
//! empty (`k=`, and `k in ()` is `k in ("")`, as in Kubernetes). `=` fills
//! `match_labels` (a second `=` on the same key becomes an `In` requirement,
//! so no condition is lost); `!=` becomes a one-value `NotIn`. [`render`]
//! writes the canonical text, and `parse(&render(s)) == s` for every valid
//! selector (one whose `In`/`NotIn` have values and whose
//! `Exists`/`DoesNotExist` have none).

pub mod json;

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use relaymesh_protocol::{LabelRequirement, LabelSelector, LabelSet, SelectorOperator};

/// Why a selector's text form was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// The text ended where more was needed.
    #[error("selector ends early: expected {expected}")]
    UnexpectedEnd {
        /// What was expected.
        expected: &'static str,
    },
    /// A character or word that does not fit here.
    #[error("unexpected {found:?} at byte {position}: expected {expected}")]
    Unexpected {
        /// What was found.
        found: String,
        /// Byte offset in the text.
        position: usize,
        /// What was expected.
        expected: &'static str,
    },
    /// A label key that Kubernetes would refuse.
    #[error("invalid label key {0:?}")]
    InvalidKey(String),
    /// A label value that Kubernetes would refuse.
    #[error("invalid label value {0:?}")]
    InvalidValue(String),
}

/// What a selector reads of a cluster's labels: a record's packed
/// [`LabelSet`] or a map.
pub trait LabelLookup {
    /// The value of `key`.
    fn label(&self, key: &str) -> Option<&str>;

    /// Whether `key` is set.
    fn has_label(&self, key: &str) -> bool {
        self.label(key).is_some()
    }
}

impl LabelLookup for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelLookup for LabelSet {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// Whether `labels` satisfy `selector`.
pub fn matches(selector: &LabelSelector, labels: &impl LabelLookup) -> bool {
    selector
        .match_labels
        .iter()
        .all(|(key, value)| labels.label(key) == Some(value.as_str()))
        && selector
            .match_expressions
            .iter()
            .all(|requirement| holds(requirement, labels.label(&requirement.key)))
}

/// Parses kubectl's `-l` syntax. The empty (or blank) text is the empty
/// selector, which matches everything.
pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
    let mut parser = Parser { text, position: 0 };
    let mut selector = LabelSelector::default();
    if parser.at_end() {
        return Ok(selector);
    }
    loop {
        parser.requirement(&mut selector)?;
        if parser.at_end() {
            return Ok(selector);
        }
        parser.expect(',', "`,` or the end")?;
    }
}

/// The canonical text of `selector`: `match_labels` first as `k=v`, then the
/// requirements in order, `In`/`NotIn` always in the parenthesised form.
pub fn render(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    for requirement in &selector.match_expressions {
        let key = &requirement.key;
        let values = requirement.values.join(",");
        parts.push(match requirement.operator {
            SelectorOperator::In => format!("{key} in ({values})"),
            SelectorOperator::NotIn => format!("{key} notin ({values})"),
            SelectorOperator::Exists => key.clone(),
            SelectorOperator::DoesNotExist => format!("!{key}"),
        });
    }
    parts.join(",")
}

fn holds(requirement: &LabelRequirement, value: Option<&str>) -> bool {
    let listed = |v: &str| requirement.values.iter().any(|listed| listed == v);
    match requirement.operator {
        SelectorOperator::In => value.is_some_and(listed),
        SelectorOperator::NotIn => value.is_none_or(|v| !listed(v)),
        SelectorOperator::Exists => value.is_some(),
        SelectorOperator::DoesNotExist => value.is_none(),
    }
}

struct Parser<'a> {
    text: &'a str,
    position: usize,
}

impl Parser<'_> {
    fn requirement(&mut self, selector: &mut LabelSelector) -> Result<(), SelectorError> {
        self.skip_space();
        if self.eat("!") {
            let key = self.key()?;
            selector.match_expressions.push(requirement(
                key,
                SelectorOperator::DoesNotExist,
                vec![],
            ));
            return Ok(());
        }
        let key = self.key()?;
        self.skip_space();
        if self.at_end() || self.peek() == Some(',') {
            selector
                .match_expressions
                .push(requirement(key, SelectorOperator::Exists, vec![]));
        } else if self.eat("!=") {
            let value = self.value()?;
            selector
                .match_expressions
                .push(requirement(key, SelectorOperator::NotIn, vec![value]));
        } else if self.eat("==") || self.eat("=") {
            let value = self.value()?;
            match selector.match_labels.entry(key) {
                Entry::Vacant(vacant) => {
                    vacant.insert(value);
                }
                Entry::Occupied(occupied) => {
                    let key = occupied.key().clone();
                    selector.match_expressions.push(requirement(
                        key,
                        SelectorOperator::In,
                        vec![value],
                    ));
                }
            }
        } else {
            let start = self.position;
            let operator = match self.word() {
                "in" => SelectorOperator::In,
                "notin" => SelectorOperator::NotIn,
                "" => {
                    let found = self.peek().map(String::from).unwrap_or_default();
                    return Err(unexpected(start, found, "an operator"));
                }
                found => return Err(unexpected(start, found.to_string(), "an operator")),
            };
            let values = self.values()?;
            selector
                .match_expressions
                .push(requirement(key, operator, values));
        }
        Ok(())
    }

    fn values(&mut self) -> Result<Vec<String>, SelectorError> {
        self.expect('(', "`(`")?;
        let mut values = Vec::new();
        self.skip_space();
        if self.eat(")") {
            // As in Kubernetes, `()` is the set holding the empty value.
            return Ok(vec![String::new()]);
        }
        loop {
            values.push(self.value()?);
            self.skip_space();
            if self.eat(")") {
                return Ok(values);
            }
            self.expect(',', "`,` or `)`")?;
        }
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        self.skip_space();
        let start = self.position;
        let key = self.word();
        if key.is_empty() {
            return Err(match self.peek() {
                None => SelectorError::UnexpectedEnd {
                    expected: "a label key",
                },
                Some(c) => unexpected(start, c.to_string(), "a label key"),
            });
        }
        if !valid_key(key) {
            return Err(SelectorError::InvalidKey(key.to_string()));
        }
        Ok(key.to_string())
    }

    fn value(&mut self) -> Result<String, SelectorError> {
        self.skip_space();
        let value = self.word();
        if !value.is_empty() && !valid_name(value) {
            return Err(SelectorError::InvalidValue(value.to_string()));
        }
        Ok(value.to_string())
    }

    /// The longest run of characters that may appear in a key or a value.
    fn word(&mut self) -> &str {
        let rest = &self.text[self.position..];
        let length = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "-_./".contains(c)))
            .unwrap_or(rest.len());
        self.position += length;
        &rest[..length]
    }

    fn expect(&mut self, token: char, expected: &'static str) -> Result<(), SelectorError> {
        self.skip_space();
        match self.peek() {
            Some(c) if c == token => {
                self.position += c.len_utf8();
                Ok(())
            }
            Some(c) => Err(unexpected(self.position, c.to_string(), expected)),
            None => Err(SelectorError::UnexpectedEnd { expected }),
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        let found = self.text[self.position..].starts_with(token);
        if found {
            self.position += token.len();
        }
        found
    }

    fn peek(&self) -> Option<char> {
        self.text[self.position..].chars().next()
    }

    fn at_end(&mut self) -> bool {
        self.skip_space();
        self.position == self.text.len()
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.position..];
        self.position += rest.len() - rest.trim_start().len();
    }
}

fn unexpected(position: usize, found: String, expected: &'static str) -> SelectorError {
    SelectorError::Unexpected {
        found,
        position,
        expected,
    }
}

fn requirement(key: String, operator: SelectorOperator, values: Vec<String>) -> LabelRequirement {
    LabelRequirement {
        key,
        operator,
        values,
    }
}

pub(crate) use crate::labels::{is_name_part as valid_name, is_qualified_name as valid_key};

#[cfg(test)]
mod tests;
