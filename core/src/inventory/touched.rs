//! The names of what changed since a driver last asked, so that it keeps
//! its copy current at O(changes).

use std::collections::BTreeSet;

/// Names that changed since a driver last took them; nothing is kept
/// until one first asks, so a node that keeps no copy keeps no names.
#[derive(Debug, Default)]
pub(super) struct Touched(Option<BTreeSet<String>>);

impl Touched {
    pub(super) fn note(&mut self, name: &str) {
        if let Some(names) = &mut self.0 {
            if !names.contains(name) {
                names.insert(name.to_string());
            }
        }
    }

    /// The names since the last call; `None` the first time.
    pub(super) fn take(&mut self) -> Option<BTreeSet<String>> {
        match &mut self.0 {
            Some(names) => Some(std::mem::take(names)),
            None => {
                self.0 = Some(BTreeSet::new());
                None
            }
        }
    }
}
