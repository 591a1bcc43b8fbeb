//! Where things live in the backend's keyspace: an object's key
//! ([`ObjectKey`]) and its encoding, the prefixes a list scans, and the
//! counter every write persists beside its objects. Kept apart from the
//! store so that every other part of it can name a key without reaching
//! back up into the store.

use std::fmt;

/// The backend key of the persisted resourceVersion counter.
pub(super) const RESOURCE_VERSION_KEY: &[u8] = b"m/resourceVersion";
/// The prefix of object keys in the backend's keyspace (what a migration
/// between backends copies).
pub const OBJECT_PREFIX: &str = "o/";

/// Where an object lives: its group, plural resource, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The API group; empty for the core group.
    pub group: String,
    /// The plural resource name, as `deployments`.
    pub resource: String,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        match &self.namespace {
            Some(namespace) => write!(f, "{resource} {namespace}/{:?}", self.name),
            None => write!(f, "{resource} {:?}", self.name),
        }
    }
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(group: &str, resource: &str, namespace: Option<&str>, name: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    pub(super) fn encode(&self) -> String {
        // Cluster-scoped objects have an empty namespace segment.
        format!(
            "{}{}",
            prefix(
                &self.group,
                &self.resource,
                Some(self.namespace.as_deref().unwrap_or_default())
            ),
            self.name
        )
    }

    pub(super) fn decode(key: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(key).ok()?.strip_prefix(OBJECT_PREFIX)?;
        let mut parts = text.splitn(4, '/');
        let group = parts.next()?;
        let resource = parts.next()?;
        let namespace = parts.next()?;
        let name = parts.next()?;
        Some(Self::new(
            group,
            resource,
            (!namespace.is_empty()).then_some(namespace),
            name,
        ))
    }
}

/// The backend key prefix of a resource's objects, in one namespace or all.
pub(super) fn prefix(group: &str, resource: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("{OBJECT_PREFIX}{group}/{resource}/{namespace}/"),
        None => format!("{OBJECT_PREFIX}{group}/{resource}/"),
    }
}
