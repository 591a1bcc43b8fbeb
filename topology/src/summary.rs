//! The status-summary algebra. A placement's status below a node is a
//! [`PlacementStatus`]; a relay merges its children's with [`merge`] and
//! forwards one. Every part merges associatively and commutatively, so the
//! root's status does not depend on the tree's shape or the order reports
//! arrive, and a relay that keeps each child's last report and merges again
//! replaces a child's contribution exactly (no double counting when a child
//! resends, reconnects or moves):
//!
//! * phase counts add ([`add`]);
//! * the failing clusters are the first [`MAX_FAILING_CLUSTERS`] by name
//!   ([`bounded`]);
//! * each status rule's [`RuleSummary`] merges by rule name: counts and sums
//!   add, minima and maxima combine, the largest [`MAX_TOP`] values are
//!   kept with their clusters, and groups merge by key, the first
//!   [`MAX_GROUPS`] keys kept and the rest folded into `other`
//!   ([`merge_rules`]);
//! * the objects' own statuses survive only while the merged status covers
//!   exactly one cluster ([`PlacementStatus::objects`]).
//!
//! A relay keeps each placement's merge as a [`Tally`], which takes one
//! child's part out and puts its new one in without merging the others.
//!
//! Everything a child reports is bounded again on merge: a hostile child's
//! huge counts saturate, its long lists are cut, its non-finite numbers are
//! dropped.

use std::collections::BTreeMap;

mod tally;
pub use tally::Tally;

use relaymesh_protocol::status::{
    MAX_FAILING_CLUSTERS, MAX_GROUPS, MAX_OBJECT_STATUS_BYTES, MAX_REPORTED_OBJECTS, MAX_REVISIONS,
    MAX_REVISION_GROUPS, MAX_RULE_SUMMARIES, MAX_TOP,
};
use relaymesh_protocol::{
    AppliedRevision, BundleId, FailingCluster, Number, ObjectStatus, PhaseCounts, PlacementStatus,
    Ranked, RevisionCounts, RevisionGroup, RuleSummary, Summary,
};

/// The sum of two counts (a commutative monoid with the zero counts).
pub fn add(a: &PhaseCounts, b: &PhaseCounts) -> PhaseCounts {
    PhaseCounts {
        pending: a.pending.saturating_add(b.pending),
        applied: a.applied.saturating_add(b.applied),
        ready: a.ready.saturating_add(b.ready),
        failed: a.failed.saturating_add(b.failed),
        offline: a.offline.saturating_add(b.offline),
    }
}

/// Every cluster of `counts`, counted as offline: what a parent reports for
/// a child whose link is down.
pub fn offline(counts: &PhaseCounts) -> PhaseCounts {
    PhaseCounts {
        offline: total(counts),
        ..PhaseCounts::default()
    }
}

/// How many clusters the counts cover. Saturates, like [`add`]: counts come
/// from children, and a hostile child's huge numbers must not overflow.
pub fn total(counts: &PhaseCounts) -> u64 {
    [counts.applied, counts.ready, counts.failed, counts.offline]
        .into_iter()
        .fold(counts.pending, u64::saturating_add)
}

/// Merges statuses: counts add up; the message kept is the first one in
/// `statuses` order, so callers pass children sorted by name for a stable
/// result. The failing clusters are the first [`MAX_FAILING_CLUSTERS`] by
/// name of all of them, each once ([`bounded`]); rule summaries merge by
/// rule ([`merge_rules`]); objects' statuses are kept only if the merged
/// counts cover exactly one cluster.
pub fn merge<'a>(statuses: impl IntoIterator<Item = &'a PlacementStatus>) -> PlacementStatus {
    let mut merged = PlacementStatus::default();
    let mut failing = Vec::new();
    let mut rules: Vec<&RuleSummary> = Vec::new();
    let mut objects: Option<&Vec<ObjectStatus>> = None;
    let mut revisions: BTreeMap<BundleId, RevisionCounts> = BTreeMap::new();
    let mut revision_groups: BTreeMap<(&str, &str), BTreeMap<BundleId, RevisionCounts>> =
        BTreeMap::new();
    let mut applied: BTreeMap<BundleId, PhaseCounts> = BTreeMap::new();
    for status in statuses {
        for counts in status.applied_revisions.iter().take(MAX_REVISIONS) {
            let merged = applied.entry(counts.revision).or_default();
            *merged = add(merged, &counts.counts);
        }
        for counts in status.revisions.iter().take(MAX_REVISIONS) {
            add_revision(&mut revisions, counts);
        }
        for group in status.revision_groups.iter().take(MAX_REVISION_GROUPS) {
            let by_revision = revision_groups
                .entry((group.label.as_str(), group.value.as_str()))
                .or_default();
            add_revision(by_revision, &group.counts);
        }
        merged.counts = add(&merged.counts, &status.counts);
        if merged.message.is_none() {
            merged.message.clone_from(&status.message);
        }
        failing.extend(status.failing.iter().take(MAX_FAILING_CLUSTERS).cloned());
        if failing.len() > 4 * MAX_FAILING_CLUSTERS {
            failing = bounded(failing);
        }
        rules.extend(status.rules.iter());
        if total(&status.counts) == 1 && !status.objects.is_empty() {
            objects = Some(&status.objects);
        }
    }
    merged.failing = bounded(failing);
    merged.rules = merge_rules(rules);
    merged.revisions = bounded_revisions(revisions);
    merged.revision_groups = bounded_revision_groups(revision_groups);
    merged.applied_revisions = bounded_applied(applied);
    if total(&merged.counts) == 1 {
        merged.objects = objects
            .map(|objects| bounded_objects(objects))
            .unwrap_or_default();
    }
    merged
}

fn add_revision(revisions: &mut BTreeMap<BundleId, RevisionCounts>, counts: &RevisionCounts) {
    let merged = revisions.entry(counts.revision).or_insert(RevisionCounts {
        revision: counts.revision,
        waiting: 0,
        updating: 0,
        succeeded: 0,
        failed: 0,
    });
    merged.waiting = merged.waiting.saturating_add(counts.waiting);
    merged.updating = merged.updating.saturating_add(counts.updating);
    merged.succeeded = merged.succeeded.saturating_add(counts.succeeded);
    merged.failed = merged.failed.saturating_add(counts.failed);
}

/// The [`MAX_REVISION_GROUPS`] groups that count the most clusters (the
/// smaller key first on a tie), sorted. A rollout keys its wave by one
/// label, whose values a fleet has few of; only a hostile child's
/// inventions or a label with very many values are ever left out, and the
/// root then gives the values it does not hear of no budget.
fn bounded_revision_groups(
    groups: BTreeMap<(&str, &str), BTreeMap<BundleId, RevisionCounts>>,
) -> Vec<RevisionGroup> {
    let mut kept: Vec<RevisionGroup> = groups
        .into_iter()
        .flat_map(|((label, value), by_revision)| {
            by_revision.into_values().map(move |counts| RevisionGroup {
                label: label.to_string(),
                value: value.to_string(),
                counts,
            })
        })
        .collect();
    if kept.len() > MAX_REVISION_GROUPS {
        let clusters = |group: &RevisionGroup| {
            let counts = &group.counts;
            counts
                .waiting
                .saturating_add(counts.updating)
                .saturating_add(counts.succeeded)
                .saturating_add(counts.failed)
        };
        kept.sort_by(|a, b| clusters(b).cmp(&clusters(a)).then_with(|| a.cmp(b)));
        kept.truncate(MAX_REVISION_GROUPS);
        kept.sort();
    }
    kept
}

/// The [`MAX_REVISIONS`] revisions that count the most clusters (the
/// smaller revision first on a tie), sorted by revision. Clusters know of
/// at most two revisions of a placement at once in a healthy tree (the
/// newest is on its way down), so only a hostile child's inventions are
/// ever left out, and they only skew its own subtree's counts.
fn bounded_revisions(revisions: BTreeMap<BundleId, RevisionCounts>) -> Vec<RevisionCounts> {
    let mut kept: Vec<RevisionCounts> = revisions.into_values().collect();
    if kept.len() > MAX_REVISIONS {
        let clusters = |counts: &RevisionCounts| {
            counts
                .waiting
                .saturating_add(counts.updating)
                .saturating_add(counts.succeeded)
                .saturating_add(counts.failed)
        };
        kept.sort_by(|a, b| {
            clusters(b)
                .cmp(&clusters(a))
                .then(a.revision.cmp(&b.revision))
        });
        kept.truncate(MAX_REVISIONS);
        kept.sort_by_key(|counts| counts.revision);
    }
    kept
}

/// The [`MAX_REVISIONS`] applied revisions that count the most clusters
/// (the smaller revision first on a tie), sorted by revision, as
/// [`bounded_revisions`] keeps them. Left out, a revision only counts no
/// cluster as updated: the root's `Ready` errs towards not ready.
fn bounded_applied(applied: BTreeMap<BundleId, PhaseCounts>) -> Vec<AppliedRevision> {
    let mut kept: Vec<AppliedRevision> = applied
        .into_iter()
        .map(|(revision, counts)| AppliedRevision { revision, counts })
        .collect();
    if kept.len() > MAX_REVISIONS {
        kept.sort_by(|a, b| {
            total(&b.counts)
                .cmp(&total(&a.counts))
                .then(a.revision.cmp(&b.revision))
        });
        kept.truncate(MAX_REVISIONS);
        kept.sort_by_key(|applied| applied.revision);
    }
    kept
}

/// The first [`MAX_FAILING_CLUSTERS`] clusters by name, each once (the
/// smallest message if a hostile child named one twice). Keeping the
/// smallest names of a union is associative and commutative, so the root's
/// list does not depend on the tree's shape or the order reports arrive.
pub fn bounded(mut failing: Vec<FailingCluster>) -> Vec<FailingCluster> {
    failing.sort();
    failing.dedup_by(|later, earlier| later.cluster == earlier.cluster);
    failing.truncate(MAX_FAILING_CLUSTERS);
    failing
}

/// Merges rule summaries by rule name, sorted by name; at most
/// [`MAX_RULE_SUMMARIES`] (the first by name), as many as a placement's
/// rules and group labels make.
pub fn merge_rules<'a>(rules: impl IntoIterator<Item = &'a RuleSummary>) -> Vec<RuleSummary> {
    let mut by_rule: BTreeMap<&str, Vec<&RuleSummary>> = BTreeMap::new();
    for rule in rules {
        by_rule.entry(&rule.rule).or_default().push(rule);
    }
    by_rule
        .into_iter()
        .take(MAX_RULE_SUMMARIES)
        .map(|(name, parts)| merge_rule(name, parts))
        .collect()
}

/// Merges one rule's summaries: every value in `all`; groups merged by
/// key, the first [`MAX_GROUPS`] keys kept and the others' values in
/// `other`. A key among the first of the whole union is among the first of
/// every part of it, so its values are never folded into `other` on the
/// way: the result does not depend on grouping or order.
fn merge_rule(name: &str, parts: Vec<&RuleSummary>) -> RuleSummary {
    let mut groups: BTreeMap<&str, Vec<&Summary>> = BTreeMap::new();
    let mut other: Vec<&Summary> = Vec::new();
    for part in &parts {
        other.push(&part.other);
        for (key, summary) in &part.groups {
            groups.entry(key).or_default().push(summary);
        }
    }
    let mut kept = Vec::new();
    for (index, (key, summaries)) in groups.into_iter().enumerate() {
        if index < MAX_GROUPS {
            kept.push((key.to_string(), merge_summaries(summaries)));
        } else {
            other.extend(summaries);
        }
    }
    RuleSummary {
        rule: name.to_string(),
        all: merge_summaries(parts.iter().map(|part| &part.all)),
        groups: kept,
        other: merge_summaries(other),
    }
}

/// Merges summaries of numbers. A summary holding a non-finite number (only
/// a hostile child sends one) is left out whole.
pub fn merge_summaries<'a>(summaries: impl IntoIterator<Item = &'a Summary>) -> Summary {
    let mut merged = Summary::default();
    for summary in summaries {
        if summary.count == 0 || !finite(summary) {
            continue;
        }
        merged.count = merged.count.saturating_add(summary.count);
        merged.sum = Number(merged.sum.0 + summary.sum.0);
        merged.min = [merged.min, summary.min].into_iter().flatten().min();
        merged.max = [merged.max, summary.max].into_iter().flatten().max();
        merged.top.extend(summary.top.iter().take(MAX_TOP).cloned());
        if merged.top.len() > 4 * MAX_TOP {
            merged.top = top(std::mem::take(&mut merged.top));
        }
    }
    merged.top = top(merged.top);
    merged
}

/// The summary of one value reported by `cluster`.
pub fn single(value: f64, cluster: &str) -> Summary {
    if !value.is_finite() {
        return Summary::default();
    }
    let value = Number(value);
    Summary {
        count: 1,
        sum: value,
        min: Some(value),
        max: Some(value),
        top: vec![Ranked {
            value,
            cluster: cluster.to_string(),
        }],
    }
}

/// The average of the summary's values, if it has any.
pub fn average(summary: &Summary) -> Option<f64> {
    (summary.count > 0).then(|| summary.sum.0 / summary.count as f64)
}

/// The largest [`MAX_TOP`] values, largest first, ties by cluster name: a
/// total order, so keeping the first of a union is associative.
fn top(mut ranked: Vec<Ranked>) -> Vec<Ranked> {
    ranked.sort_by(|a, b| {
        b.value
            .cmp(&a.value)
            .then_with(|| a.cluster.cmp(&b.cluster))
    });
    ranked.truncate(MAX_TOP);
    ranked
}

fn finite(summary: &Summary) -> bool {
    let numbers = [Some(summary.sum), summary.min, summary.max];
    numbers.iter().flatten().all(|number| number.0.is_finite())
        && summary.top.iter().all(|ranked| ranked.value.0.is_finite())
}

/// At most [`MAX_REPORTED_OBJECTS`] objects, none with a status over
/// [`MAX_OBJECT_STATUS_BYTES`].
fn bounded_objects(objects: &[ObjectStatus]) -> Vec<ObjectStatus> {
    objects
        .iter()
        .filter(|object| object.status.len() <= MAX_OBJECT_STATUS_BYTES)
        .take(MAX_REPORTED_OBJECTS)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
