//! Why a Placement is not valid: the field at fault and what is wrong,
//! as the API's 422 names them.

use crate::rules::RuleError;

/// Why a Placement is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// A field is missing or has the wrong shape.
    #[error("{field}: {message}")]
    Invalid {
        /// The field's path, as Kubernetes writes it (`spec.maxClusters`).
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl From<crate::selector::json::InvalidField> for PlacementError {
    fn from(error: crate::selector::json::InvalidField) -> Self {
        Self::Invalid {
            field: error.field,
            message: error.message,
        }
    }
}

/// A status rule's error names its field (`spec.statusRules[1].select`)
/// and says which rule and where in its expression, so the API's 422
/// carries both.
impl From<RuleError> for PlacementError {
    fn from(error: RuleError) -> Self {
        Self::Invalid {
            field: error.field().to_string(),
            message: error.message(),
        }
    }
}

pub(super) fn invalid(field: impl Into<String>, message: impl Into<String>) -> PlacementError {
    PlacementError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}
