//! The decision one relay makes for one placement entry: which children get
//! it, and how much of its bound each must fill.
//!
//! # What a placement selects
//!
//! *selected* = the clusters matching `selector` (only those carrying the
//! `spread_by` label when it is set), bounded by `max_clusters` and spread over
//! `spread_by`'s values, ∪ the clusters named in `names`. A named cluster is
//! always selected and does not count against the bound; it may also be among
//! the label-selected ones. A target without a selector selects by name only.
//! Without `max_clusters` every matching cluster is selected.
//!
//! # How the bound travels down
//!
//! The bound becomes a [`Quota`] (a total, and with `spread_by` a count per
//! label value) that each relay splits over its children with [`split`],
//! using only the children's [`Aggregate`]s, so a relay's work is
//! O(children × distinct label sets), whatever the number of clusters below.
//!
//! * **At the root** (no quota received) the quota is derived from
//!   `max_clusters` over the relay's whole supply: without `spread_by`,
//!   `min(max_clusters, supply)`; with it, `max_clusters` spread as evenly as
//!   possible over the values in sorted order ([`spread`]): every value gets the
//!   same level or its whole supply if smaller, the leftover goes one by one to
//!   the first values (in sorted order) that still have spare supply. A relay
//!   that receives a total without per-value counts derives them the same way.
//! * **At every relay** each amount (the total, or each value's count) is
//!   spread as evenly as possible over the children that can supply it, never
//!   above a child's supply; the children are ordered by a hash of the
//!   placement key and their name, so leftovers land on different children
//!   for different placements, and the order in which children are given does
//!   not matter.
//! * **Sticky**: given the split this relay made last time, each child keeps
//!   its previous share as far as its supply still allows and the quota still
//!   needs it; only the difference is placed anew (evenly, in hash order), and
//!   when the quota shrank, the largest kept shares are trimmed first.
//!
//! If a quota exceeds the supply (the parent's view was older than ours) the
//! split gives what there is; [`Split::quota_sum`] tells how much.
//!
//! An edge agent is a child whose aggregate holds exactly its own cluster: a
//! share of one (or `Unbounded`, since it matches) selects it; see
//! [`leaf_selects`] for the agent's side of the same rule. With exact
//! aggregates the leaves select exactly `min(max_clusters, supply)` clusters
//! by label, per value as the root decided.

use std::collections::{BTreeMap, BTreeSet};

use relaymesh_protocol::{PlacementTarget, Quota};

use crate::aggregate::{Aggregate, Labels, Supply};
use crate::selector::LabelLookup;
use crate::SubtreeIndex;

/// One child as [`split`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct ChildInput<'a> {
    /// The child's name.
    pub name: &'a str,
    /// The clusters of the child's subtree.
    pub aggregate: &'a Aggregate,
}

/// Which share of a placement each child gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// Only the children that get something.
    pub per_child: BTreeMap<String, ChildShare>,
}

/// What one child must select below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildShare {
    /// Every matching cluster below.
    Unbounded,
    /// Exactly this many matching clusters below (per value with `spread_by`).
    Quota(Quota),
}

/// Which quota each child gets. `own_quota` is the quota this relay received
/// (`None` at the root, where it is derived from `max_clusters`); `previous`
/// is the split this relay made last time for this placement, to keep
/// assignments where they are. See the module documentation for the rules.
pub fn split(
    placement_key: &str,
    target: &PlacementTarget,
    own_quota: Option<&Quota>,
    children: &[ChildInput<'_>],
    previous: Option<&Split>,
) -> Split {
    let Some(selector) = target.selector.as_ref() else {
        return Split::default();
    };
    let spread_by = target.spread_by.as_deref();

    let quota = match (own_quota, target.max_clusters) {
        (Some(quota), _) => quota.clone(),
        (None, Some(max)) => Quota {
            total: max,
            per_value: BTreeMap::new(),
        },
        (None, None) => {
            // Every matching cluster, cordoned or drained too: like a
            // DaemonSet's pods, a placement to every cluster stays.
            let per_child = children
                .iter()
                .filter(|child| child.aggregate.supply(Some(selector), spread_by).total > 0)
                .map(|child| (child.name.to_string(), ChildShare::Unbounded))
                .collect();
            return Split { per_child };
        }
    };
    // A bounded placement leaves drained clusters (chosen elsewhere), and
    // keeps but adds no share on cordoned ones. One pass for both.
    let mut supplies: BTreeMap<&str, Supply> = BTreeMap::new();
    let mut open: BTreeMap<&str, Supply> = BTreeMap::new();
    for child in children {
        for (labels, count) in child.aggregate.iter() {
            if !by_labels(selector, true, labels) {
                continue;
            }
            let value = match spread_by {
                Some(key) => match labels.get(key) {
                    Some(value) => Some(value),
                    None => continue,
                },
                None => None,
            };
            let add = |supply: &mut Supply| {
                supply.total = supply.total.saturating_add(count);
                if let Some(value) = value {
                    let per_value = supply.per_value.entry(value.to_string()).or_default();
                    *per_value = per_value.saturating_add(count);
                }
            };
            add(supplies.entry(child.name).or_default());
            if !is_cordoned(labels) {
                add(open.entry(child.name).or_default());
            }
        }
    }
    let open_of = |name: &str, value: Option<&str>| {
        open.get(name).map_or(0, |supply| match value {
            Some(value) => supply.per_value.get(value).copied().unwrap_or(0),
            None => supply.total,
        })
    };

    let mut order: Vec<(u64, &str)> = supplies
        .keys()
        .map(|name| (child_rank(placement_key, name), *name))
        .collect();
    order.sort_unstable();
    let order: Vec<&str> = order.into_iter().map(|(_, name)| name).collect();

    let mut shares: BTreeMap<&str, Quota> = BTreeMap::new();
    if spread_by.is_some() {
        let per_value = if quota.per_value.is_empty() {
            let mut own = Supply::default();
            supplies.values().for_each(|supply| own.merge(supply));
            spread(quota.total, &own).per_value
        } else {
            quota.per_value
        };
        for (value, amount) in &per_value {
            let capacity = |name: &str| supplies[name].per_value.get(value).copied().unwrap_or(0);
            let open = |name: &str| open_of(name, Some(value));
            let before = |share: &ChildShare| match share {
                ChildShare::Unbounded => u64::MAX,
                ChildShare::Quota(quota) => quota.per_value.get(value).copied().unwrap_or(0).into(),
            };
            let amounts = distribute(
                u64::from(*amount),
                &order,
                (capacity, open),
                previous,
                before,
            );
            for (name, amount) in order.iter().zip(amounts) {
                if amount > 0 {
                    let share = shares.entry(name).or_default();
                    share.total = share.total.saturating_add(to_u32(amount));
                    share.per_value.insert(value.clone(), to_u32(amount));
                }
            }
        }
    } else {
        let capacity = |name: &str| supplies[name].total;
        let open = |name: &str| open_of(name, None);
        let before = |share: &ChildShare| match share {
            ChildShare::Unbounded => u64::MAX,
            ChildShare::Quota(quota) => quota.total.into(),
        };
        let amounts = distribute(
            quota.total.into(),
            &order,
            (capacity, open),
            previous,
            before,
        );
        for (name, amount) in order.iter().zip(amounts) {
            if amount > 0 {
                shares.entry(name).or_default().total = to_u32(amount);
            }
        }
    }
    let per_child = shares
        .into_iter()
        .map(|(name, quota)| (name.to_string(), ChildShare::Quota(quota)))
        .collect();
    Split { per_child }
}

/// The label the root sets on a cordoned cluster (`relayctl cordon`): it
/// keeps the count-bounded placements it has and gets no new ones.
pub const CORDONED_LABEL: &str = "relaymesh.dev/cordoned";
/// The label the root sets on a cluster being drained (`relayctl drain`):
/// `true` while its count-bounded placements are placed elsewhere (it
/// keeps its copies meanwhile), `done` once they run there.
pub const DRAINING_LABEL: &str = "relaymesh.dev/draining";

/// The label an agent sets on its own cluster while it runs as many
/// placements as its capacity allows (`edge-agent join --max-placements`):
/// count-bounded placements add nothing more there, as on a cordoned one.
pub const FULL_LABEL: &str = "relaymesh.dev/full";

/// The label a relay sets on a cluster below it that has been
/// disconnected for longer than the relay's `--lost-after`: count-bounded
/// placements are placed elsewhere, as from a drained one, while its agent
/// keeps running what it had. It goes when the cluster is back.
pub const LOST_LABEL: &str = "relaymesh.dev/lost";

/// The label an agent sets on its own cluster while the cluster's API does
/// not answer it (`ClusterUnreachable`), and clears when it answers again.
/// It only tells: the cluster stays open to placements (its placements
/// report the failure themselves).
pub const UNREACHABLE_LABEL: &str = "relaymesh.dev/unreachable";

/// Whether a cluster with `labels` takes no new count-bounded placement:
/// cordoned, drained, lost or full.
pub fn is_cordoned(labels: &impl LabelLookup) -> bool {
    labels.has_label(CORDONED_LABEL) || labels.has_label(FULL_LABEL) || is_drained(labels)
}

/// Whether a cluster with `labels` is drained, being drained or lost:
/// count-bounded placements are placed elsewhere.
pub fn is_drained(labels: &impl LabelLookup) -> bool {
    labels.has_label(DRAINING_LABEL) || labels.has_label(LOST_LABEL)
}

/// The root's quota: `max` spread as evenly as possible over the values of
/// `supply` (in sorted order), never above a value's supply; without values
/// (no `spread_by`), `min(max, supply.total)`.
pub fn spread(max: u32, supply: &Supply) -> Quota {
    if supply.per_value.is_empty() {
        return Quota {
            total: to_u32(u64::from(max).min(supply.total)),
            per_value: BTreeMap::new(),
        };
    }
    let capacities: Vec<u64> = supply.per_value.values().copied().collect();
    let amounts = water_fill(max.into(), &capacities);
    let per_value: BTreeMap<String, u32> = supply
        .per_value
        .keys()
        .zip(amounts)
        .filter(|(_, amount)| *amount > 0)
        .map(|(value, amount)| (value.clone(), to_u32(amount)))
        .collect();
    Quota {
        total: per_value.values().sum(),
        per_value,
    }
}

/// Explicit names: which children must get the entry because a named node
/// lies below them (or is them).
pub fn named_children(target: &PlacementTarget, index: &SubtreeIndex) -> BTreeSet<String> {
    named_children_by(target, |name| index.via(name).map(str::to_string))
}

/// [`named_children`] with any way of finding the child a node lies under.
pub fn named_children_by(
    target: &PlacementTarget,
    mut via: impl FnMut(&str) -> Option<String>,
) -> BTreeSet<String> {
    target.names.iter().filter_map(|name| via(name)).collect()
}

/// The entry's target as `child` must receive it, its quota filled in, or
/// `None` if the child gets nothing. A child that holds only named clusters
/// gets a quota of zero when the placement is bounded. The names are passed
/// on whole.
pub fn cut(
    target: &PlacementTarget,
    split: &Split,
    named: &BTreeSet<String>,
    child: &str,
) -> Option<PlacementTarget> {
    let share = split.per_child.get(child);
    if share.is_none() && !named.contains(child) {
        return None;
    }
    let bounded = target.max_clusters.is_some() || target.quota.is_some();
    let quota = match share {
        Some(ChildShare::Quota(quota)) => Some(quota.clone()),
        Some(ChildShare::Unbounded) => None,
        None if bounded => Some(Quota::default()),
        None => None,
    };
    Some(PlacementTarget {
        quota,
        ..target.clone()
    })
}

/// Whether `target` may select the cluster `name` with `labels`, whatever
/// quota a relay gives it: the cluster is named, or the label selector
/// matches it; a count-bounded target never selects a drained (or lost)
/// cluster, which is placed elsewhere, while one without a bound stays on
/// it, as a DaemonSet's pods do. The one home of this rule: the split,
/// status, handovers and `relayctl explain` all ask it.
pub fn target_selects(target: &PlacementTarget, name: &str, labels: &impl LabelLookup) -> bool {
    let bounded = target.max_clusters.is_some() || target.quota.is_some();
    target.names.iter().any(|named| named == name)
        || target
            .selector
            .as_ref()
            .is_some_and(|selector| by_labels(selector, bounded, labels))
}

/// Whether `selector` selects a cluster with `labels` for a target that is
/// count-`bounded` or not (see [`target_selects`]).
fn by_labels(
    selector: &relaymesh_protocol::LabelSelector,
    bounded: bool,
    labels: &impl LabelLookup,
) -> bool {
    !(bounded && is_drained(labels)) && crate::selector::matches(selector, labels)
}

/// The agent's side: whether the cluster `name` with `labels` is selected by
/// the target it received (named, or its quota covers it).
pub fn leaf_selects(target: &PlacementTarget, name: &str, labels: &Labels) -> bool {
    if target.names.iter().any(|named| named == name) {
        return true;
    }
    let own = Aggregate::of_cluster(&labels.clone().into());
    let me = [ChildInput {
        name,
        aggregate: &own,
    }];
    !split(name, target, target.quota.as_ref(), &me, None)
        .per_child
        .is_empty()
}

impl Split {
    /// The quotas handed out, summed (`Unbounded` shares count nothing).
    pub fn quota_sum(&self) -> Quota {
        let mut sum = Quota::default();
        for share in self.per_child.values() {
            if let ChildShare::Quota(quota) = share {
                sum.total = sum.total.saturating_add(quota.total);
                for (value, count) in &quota.per_value {
                    let per_value = sum.per_value.entry(value.clone()).or_default();
                    *per_value = per_value.saturating_add(*count);
                }
            }
        }
        sum
    }
}

/// Spreads `amount` over the children in `order`, each at most its
/// `capacity`, keeping what `previous` gave them (read by `before`) where it
/// can.
pub(crate) fn distribute(
    amount: u64,
    order: &[&str],
    (capacity, open): (impl Fn(&str) -> u64, impl Fn(&str) -> u64),
    previous: Option<&Split>,
    before: impl Fn(&ChildShare) -> u64,
) -> Vec<u64> {
    let capacities: Vec<u64> = order.iter().map(|name| capacity(name)).collect();
    let open: Vec<u64> = order.iter().map(|name| open(name)).collect();
    let had: Vec<u64> = match previous {
        Some(previous) => order
            .iter()
            .map(|name| previous.per_child.get(*name).map_or(0, &before))
            .collect(),
        None => vec![0; order.len()],
    };
    let kept: Vec<u64> = had
        .iter()
        .zip(&capacities)
        .map(|(had, capacity)| (*had).min(*capacity))
        .collect();
    // What is added goes only where clusters are open (not cordoned): as
    // many as a child has, beyond what it keeps.
    let capacities: Vec<u64> = kept
        .iter()
        .zip(capacities.iter().zip(&open))
        .map(|(kept, (capacity, open))| (*kept + *open).min(*capacity))
        .collect();
    keep_then_fill(amount, &capacities, &kept)
}

/// Spreads `amount` over slots of the given capacities, each keeping what
/// it `had` as far as its capacity allows and the amount needs it (the
/// largest kept shares trimmed first when it shrank); only the difference
/// is placed anew, evenly.
pub(crate) fn keep_then_fill(amount: u64, capacities: &[u64], had: &[u64]) -> Vec<u64> {
    let kept: Vec<u64> = had
        .iter()
        .zip(capacities)
        .map(|(had, capacity)| (*had).min(*capacity))
        .collect();
    let kept_sum = saturating_sum(&kept);
    if kept_sum >= amount {
        return water_fill(amount, &kept);
    }
    let spare: Vec<u64> = capacities.iter().zip(&kept).map(|(c, k)| c - k).collect();
    let added = water_fill(amount - kept_sum, &spare);
    kept.iter().zip(added).map(|(k, a)| k + a).collect()
}

/// The sum of `values`, saturating: capacities come from the supplies
/// children report.
fn saturating_sum(values: &[u64]) -> u64 {
    values
        .iter()
        .fold(0, |sum, value| sum.saturating_add(*value))
}

/// Spreads `amount` as evenly as possible over slots of the given
/// capacities: every slot gets the same level `L` or its capacity if lower,
/// and the remainder goes, one each, to the first slots whose capacity
/// exceeds `L`. Gives every slot its capacity if `amount` exceeds their sum.
pub(crate) fn water_fill(amount: u64, capacities: &[u64]) -> Vec<u64> {
    let total = saturating_sum(capacities);
    if amount >= total {
        return capacities.to_vec();
    }
    let mut sorted = capacities.to_vec();
    sorted.sort_unstable();
    // Find the level: below it every slot is full, above it none is.
    let mut filled = 0u64;
    let mut level = 0u64;
    let mut remainder = 0u64;
    for (index, capacity) in sorted.iter().enumerate() {
        let open = (sorted.len() - index) as u64;
        if filled.saturating_add(capacity.saturating_mul(open)) >= amount {
            level = (amount - filled) / open;
            remainder = (amount - filled) % open;
            break;
        }
        filled = filled.saturating_add(*capacity);
    }
    capacities
        .iter()
        .map(|capacity| {
            let mut amount = (*capacity).min(level);
            if remainder > 0 && *capacity > level {
                amount += 1;
                remainder -= 1;
            }
            amount
        })
        .collect()
}

/// A child's place in the order for one placement: 64-bit FNV-1a of the
/// placement key, a separator and the child's name.
pub(crate) fn child_rank(placement_key: &str, child: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = placement_key.bytes().chain([0xff]).chain(child.bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Amounts never exceed the quota they were cut from, itself a `u32`.
pub(crate) fn to_u32(amount: u64) -> u32 {
    u32::try_from(amount).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
