//! A merged status kept as its parts change: a relay with thousands of
//! children merges one child's new report in O(log children), not by
//! merging every child again ([`merge`] over all of them).
//!
//! The sums ([`PhaseCounts`] and the per-revision counts) are kept exactly
//! in `u128`, so a part can be taken out again; they saturate to `u64` only
//! when read, as [`merge`]'s saturating additions of non-negative numbers
//! do. The parts that do not subtract (the first message, the failing
//! clusters, the rules' summaries, one cluster's objects) are kept as the
//! set of members that have any, and merged from the members' statuses
//! when read: few children fail or carry rules, and a message is the first
//! of its set.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::status::{MAX_FAILING_CLUSTERS, MAX_REVISIONS, MAX_REVISION_GROUPS};
use relaymesh_protocol::{BundleId, PhaseCounts, PlacementStatus, RevisionCounts};

use super::{
    bounded, bounded_applied, bounded_objects, bounded_revision_groups, bounded_revisions,
    merge_rules, total,
};

/// The statuses of a set of named members, merged as [`merge`] merges them
/// in name order, kept up to date by [`Tally::add`] and [`Tally::remove`].
///
/// [`merge`]: super::merge
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    members: usize,
    counts: [u128; 5],
    applied: BTreeMap<BundleId, Listed<5>>,
    revisions: BTreeMap<BundleId, Listed<4>>,
    groups: BTreeMap<(String, String), BTreeMap<BundleId, Listed<4>>>,
    messages: BTreeSet<String>,
    failing: BTreeSet<String>,
    rules: BTreeSet<String>,
    objects: BTreeSet<String>,
}

/// Sums of one revision's counts, and how many listings made them: a
/// revision listed with zero counts is still part of [`merge`]'s result.
///
/// [`merge`]: super::merge
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Listed<const N: usize> {
    listings: u64,
    sums: [u128; N],
}

impl<const N: usize> Default for Listed<N> {
    fn default() -> Self {
        Self {
            listings: 0,
            sums: [0; N],
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sign {
    Add,
    Remove,
}

impl Tally {
    /// How many members it holds.
    pub fn members(&self) -> usize {
        self.members
    }

    /// Adds member `member`'s status. A member is added once; to change
    /// its status, [`Tally::remove`] the old one first.
    pub fn add(&mut self, member: &str, status: &PlacementStatus) {
        self.members += 1;
        self.apply(member, status, Sign::Add);
    }

    /// Takes out member `member`'s status, exactly as it was added.
    pub fn remove(&mut self, member: &str, status: &PlacementStatus) {
        self.members = self.members.saturating_sub(1);
        self.apply(member, status, Sign::Remove);
    }

    fn apply(&mut self, member: &str, status: &PlacementStatus, sign: Sign) {
        sum(&mut self.counts, &phase_counts(&status.counts), sign);
        for counts in status.applied_revisions.iter().take(MAX_REVISIONS) {
            list(
                &mut self.applied,
                counts.revision,
                &phase_counts(&counts.counts),
                sign,
            );
        }
        for counts in status.revisions.iter().take(MAX_REVISIONS) {
            list(
                &mut self.revisions,
                counts.revision,
                &revision_counts(counts),
                sign,
            );
        }
        for group in status.revision_groups.iter().take(MAX_REVISION_GROUPS) {
            let key = (group.label.clone(), group.value.clone());
            let by_revision = self.groups.entry(key.clone()).or_default();
            list(
                by_revision,
                group.counts.revision,
                &revision_counts(&group.counts),
                sign,
            );
            if by_revision.is_empty() {
                self.groups.remove(&key);
            }
        }
        let has_objects = total(&status.counts) == 1 && !status.objects.is_empty();
        for (set, has) in [
            (&mut self.messages, status.message.is_some()),
            (&mut self.failing, !status.failing.is_empty()),
            (&mut self.rules, !status.rules.is_empty()),
            (&mut self.objects, has_objects),
        ] {
            if !has {
                continue;
            }
            match sign {
                Sign::Add => set.insert(member.to_string()),
                Sign::Remove => set.remove(member),
            };
        }
    }

    /// The merged status: what [`merge`] makes of the members' statuses in
    /// name order. `status_of` gives a member's status as it was added; it
    /// is asked only of the members with a message, failing clusters, rule
    /// summaries or objects.
    ///
    /// [`merge`]: super::merge
    pub fn status<'a>(
        &self,
        status_of: impl Fn(&str) -> Option<&'a PlacementStatus>,
    ) -> PlacementStatus {
        let counts = saturated_counts(&self.counts);
        let message = self
            .messages
            .iter()
            .find_map(|member| status_of(member)?.message.clone());
        let mut failing = Vec::new();
        for member in &self.failing {
            let Some(status) = status_of(member) else {
                continue;
            };
            failing.extend(status.failing.iter().take(MAX_FAILING_CLUSTERS).cloned());
            if failing.len() > 4 * MAX_FAILING_CLUSTERS {
                failing = bounded(failing);
            }
        }
        let rules = merge_rules(
            self.rules
                .iter()
                .filter_map(|member| status_of(member))
                .flat_map(|status| status.rules.iter()),
        );
        let objects = match total(&counts) {
            1 => self
                .objects
                .iter()
                .next_back()
                .and_then(|member| status_of(member))
                .map(|status| bounded_objects(&status.objects))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let applied = self
            .applied
            .iter()
            .map(|(revision, listed)| (*revision, saturated_counts(&listed.sums)))
            .collect();
        let revisions = self
            .revisions
            .iter()
            .map(|(revision, listed)| (*revision, saturated_revision(*revision, &listed.sums)))
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|((label, value), by_revision)| {
                let by_revision = by_revision
                    .iter()
                    .map(|(revision, listed)| {
                        (*revision, saturated_revision(*revision, &listed.sums))
                    })
                    .collect();
                ((label.as_str(), value.as_str()), by_revision)
            })
            .collect();
        PlacementStatus {
            counts,
            message,
            failing: bounded(failing),
            rules,
            objects,
            revisions: bounded_revisions(revisions),
            revision_groups: bounded_revision_groups(groups),
            applied_revisions: bounded_applied(applied),
        }
    }
}

fn sum<const N: usize>(sums: &mut [u128; N], values: &[u64; N], sign: Sign) {
    for (sum, value) in sums.iter_mut().zip(values) {
        let value = u128::from(*value);
        // Exact: a part is only taken out after it was added.
        *sum = match sign {
            Sign::Add => sum.saturating_add(value),
            Sign::Remove => sum.saturating_sub(value),
        };
    }
}

fn list<const N: usize>(
    listed: &mut BTreeMap<BundleId, Listed<N>>,
    revision: BundleId,
    values: &[u64; N],
    sign: Sign,
) {
    let entry = listed.entry(revision).or_default();
    sum(&mut entry.sums, values, sign);
    entry.listings = match sign {
        Sign::Add => entry.listings.saturating_add(1),
        Sign::Remove => entry.listings.saturating_sub(1),
    };
    if entry.listings == 0 {
        listed.remove(&revision);
    }
}

fn phase_counts(counts: &PhaseCounts) -> [u64; 5] {
    [
        counts.pending,
        counts.applied,
        counts.ready,
        counts.failed,
        counts.offline,
    ]
}

fn revision_counts(counts: &RevisionCounts) -> [u64; 4] {
    [
        counts.waiting,
        counts.updating,
        counts.succeeded,
        counts.failed,
    ]
}

fn saturate(sum: u128) -> u64 {
    u64::try_from(sum).unwrap_or(u64::MAX)
}

fn saturated_counts(sums: &[u128; 5]) -> PhaseCounts {
    PhaseCounts {
        pending: saturate(sums[0]),
        applied: saturate(sums[1]),
        ready: saturate(sums[2]),
        failed: saturate(sums[3]),
        offline: saturate(sums[4]),
    }
}

fn saturated_revision(revision: BundleId, sums: &[u128; 4]) -> RevisionCounts {
    RevisionCounts {
        revision,
        waiting: saturate(sums[0]),
        updating: saturate(sums[1]),
        succeeded: saturate(sums[2]),
        failed: saturate(sums[3]),
    }
}

#[cfg(test)]
mod tests;
