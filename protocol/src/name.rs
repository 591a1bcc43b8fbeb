//! Node names: the rules every relay and cluster name follows.
//!
//! A name is an RFC 1123 DNS label, as Kubernetes requires of most object
//! names, so that it can be a certificate's DNS name and a Kubernetes object
//! name at the root without escaping.

use crate::limits::MAX_NAME_LEN;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name was empty.
    #[error("a name must not be empty")]
    Empty,
    /// The name was longer than [`MAX_NAME_LEN`].
    #[error("name {name:?} is longer than {MAX_NAME_LEN} characters")]
    TooLong {
        /// The first characters of the name.
        name: String,
    },
    /// The name had a character other than `a-z`, `0-9` and `-`, or started or
    /// ended with `-`.
    #[error(
        "name {name:?} must consist of lower case letters, digits and '-', and start and end with a letter or digit"
    )]
    Invalid {
        /// The name.
        name: String,
    },
}

/// Checks that `name` is a valid node name.
pub fn validate(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            name: name.chars().take(MAX_NAME_LEN).collect(),
        });
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if !name.chars().all(allowed) || name.starts_with('-') || name.ends_with('-') {
        return Err(NameError::Invalid {
            name: name.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_and_refuses() {
        assert!(validate("eu-west-1").is_ok());
        assert!(validate("a").is_ok());
        assert_eq!(validate(""), Err(NameError::Empty));
        assert!(matches!(validate("-eu"), Err(NameError::Invalid { .. })));
        assert!(matches!(validate("EU"), Err(NameError::Invalid { .. })));
        assert!(matches!(
            validate("eu.west"),
            Err(NameError::Invalid { .. })
        ));
        assert!(matches!(
            validate(&"a".repeat(64)),
            Err(NameError::TooLong { .. })
        ));
    }

    proptest! {
        #[test]
        fn valid_names_are_accepted(name in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?") {
            prop_assert!(validate(&name).is_ok());
        }

        #[test]
        fn never_panics(name in ".*") {
            let _ = validate(&name);
        }
    }
}
