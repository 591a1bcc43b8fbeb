//! Rollouts: how a placement's newest revision reaches its clusters in
//! waves, while the clusters not reached yet keep the previous revision.
//!
//! # Who decides what
//!
//! * **The root** decides only how many of the selected clusters run the
//!   newest revision ([`next_wave`]): from the counts the clusters report
//!   for that revision (succeeded, failed, updating), the rollout's spec
//!   and what was handed out last. It never lists clusters.
//! * **Every relay** splits that number over its children ([`split_wave`])
//!   from their aggregated inventory, as it splits a placement's bound:
//!   with an order label, the root's core first turns the number into
//!   counts per label value, smallest values first ([`derive()`]), and each
//!   relay splits each value's count over the children that hold clusters
//!   with that value. A split keeps what each child had last time, so a
//!   cluster in a wave stays in it while the wave grows.
//! * **The agent's parent** gives each agent a share of one or zero: the
//!   agent runs the newest revision with one, the previous with zero
//!   ([`leaf_in_wave`]).
//!
//! A split is a pure function of the wave, the children's inventory and
//! the last split. A relay that restarts mid-rollout decides again without
//! its last split; with the same inventory it decides the same, with a
//! changed one a cluster may trade places with another in the same wave.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::Duration;

use relaymesh_protocol::{LabelSelector, RevisionCounts, Wave, UNLABELLED};

use crate::aggregate::{Aggregate, Labels, Supply};
use crate::placement::{child_rank, keep_then_fill, to_u32};
use crate::selector::LabelLookup;

/// How a placement's new revisions reach its clusters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    /// Every selected cluster at once (the default).
    #[default]
    All,
    /// In waves of at most `maxConcurrency` clusters updating at once.
    Progressive,
    /// First one cluster per value of a label, then progressively.
    Canary,
}

/// A number of clusters, or a share of the selected ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// This many clusters.
    Count(u32),
    /// This percentage of the selected clusters, rounded up.
    Percent(u32),
}

impl Amount {
    /// The number of clusters out of `selected`.
    pub fn of(self, selected: u64) -> u64 {
        match self {
            Self::Count(count) => u64::from(count),
            Self::Percent(percent) => (selected.saturating_mul(u64::from(percent))).div_ceil(100),
        }
    }
}

/// A placement's `spec.rollout`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutSpec {
    /// How new revisions go out.
    pub strategy: Strategy,
    /// How many clusters may be updating at once (failed ones hold their
    /// place until they recover); at least one.
    pub max_concurrency: Amount,
    /// How long a cluster must stay ready on the new revision before it
    /// counts as done and frees its place.
    pub min_success_time: Duration,
    /// A cluster not ready this long after it started the new revision
    /// counts as failed; `None`: it may take as long as it takes.
    pub progress_deadline: Option<Duration>,
    /// More failed clusters than this halt the rollout.
    pub max_failures: Amount,
    /// The cluster label whose values decide who goes first (ascending;
    /// numerically when every value is a number).
    pub order_by: Option<String>,
    /// With `Canary`: the first wave is one cluster per value of this label.
    pub canary_by: Option<String>,
    /// No new wave starts while set.
    pub paused: bool,
    /// Conditions that must be `True` on the Placement before a wave starts.
    pub gates: Vec<String>,
    /// `maxUnavailablePerGroup`: at most this many clusters of each group
    /// updating or failed at once (a percentage of the group's selected
    /// clusters, rounded up; at least one), where the groups are the
    /// subtrees of the root's children, or the values of `group_label`. A
    /// group whose failures fill its places halts the rollout.
    pub max_unavailable_per_group: Option<Amount>,
    /// With `max_unavailable_per_group`: the cluster label whose values are
    /// the groups; `None`: the root's children are.
    pub group_label: Option<String>,
}

impl Default for RolloutSpec {
    fn default() -> Self {
        Self {
            strategy: Strategy::All,
            max_concurrency: Amount::Count(1),
            min_success_time: Duration::ZERO,
            progress_deadline: None,
            max_failures: Amount::Count(0),
            order_by: None,
            canary_by: None,
            paused: false,
            gates: Vec::new(),
            max_unavailable_per_group: None,
            group_label: None,
        }
    }
}

impl RolloutSpec {
    /// Whether new revisions go out in waves.
    pub fn is_staged(&self) -> bool {
        self.strategy != Strategy::All
    }
}

/// Where a rollout stands, as the root keeps it between decisions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position {
    /// The canary wave succeeded (or there is none).
    pub canary_done: bool,
    /// How many clusters the last wave let run the newest revision.
    pub admitted: u32,
    /// With `maxUnavailablePerGroup`: how many of them per group (by the
    /// name of the root's child, or the value of the group label);
    /// `admitted` is their sum.
    pub per_group: BTreeMap<String, u32>,
}

/// One group of a rollout with `maxUnavailablePerGroup`: a child of the
/// root and its subtree, or the clusters with one value of the group
/// label, as the root knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupObserved {
    /// The root's child, or the label's value.
    pub name: String,
    /// How many clusters of its subtree the placement selects.
    pub selected: u64,
    /// Its clusters' counts for the newest revision.
    pub counts: Counts,
}

/// What the root knows when it decides the next wave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// How many clusters the placement selects.
    pub selected: u64,
    /// How many clusters the last wave actually reached: the relays can
    /// hand out no more than the clusters there are.
    pub handed: u64,
    /// The clusters' counts for the newest revision.
    pub counts: Counts,
    /// Every gate of the rollout is open.
    pub gates_open: bool,
    /// With `maxUnavailablePerGroup`: every group, by name.
    pub groups: Vec<GroupObserved>,
}

/// The counts of [`RevisionCounts`] without the revision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Selected, still on the previous revision.
    pub waiting: u64,
    /// Running it, not done yet.
    pub updating: u64,
    /// Running it, ready for `minSuccessTime`.
    pub succeeded: u64,
    /// Running it, failed.
    pub failed: u64,
}

impl From<&RevisionCounts> for Counts {
    fn from(counts: &RevisionCounts) -> Self {
        Self {
            waiting: counts.waiting,
            updating: counts.updating,
            succeeded: counts.succeeded,
            failed: counts.failed,
        }
    }
}

/// Why the rollout is where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Waves go on.
    Progressing,
    /// `paused` is set.
    Paused,
    /// A gate is closed.
    Gated,
    /// Too many clusters failed; the reason says how many.
    Halted(String),
    /// Every selected cluster succeeded on the newest revision.
    Complete,
}

/// The root's decision: the wave to hand down, where the rollout now
/// stands and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The wave for the root's core to split.
    pub wave: Wave,
    /// The position to remember.
    pub position: Position,
    /// Why.
    pub state: State,
}

/// The next wave of a staged rollout (see the module documentation).
///
/// * Complete once every selected cluster succeeded.
/// * Halted while more clusters failed than `maxFailures` allows; paused,
///   or gated while a gate is closed: the wave stays as it is (it never
///   shrinks: clusters on the new revision stay there).
/// * Canary: one cluster per value of `canary_by`, until all of them
///   succeeded.
/// * Progressive: as many as have succeeded, plus `maxConcurrency`, so at
///   most that many are updating or failed (a cluster handed the revision
///   that has not reported yet counts as updating). A failed cluster holds
///   its place until it recovers: a rollout never outruns its failures,
///   and when failures hold every place it halts too, saying so.
pub fn next_wave(spec: &RolloutSpec, position: &Position, observed: &Observed) -> Step {
    let counts = observed.counts;
    let selected = observed.selected;
    let hold = |state: State| Step {
        wave: progressive_wave(spec, position),
        position: position.clone(),
        state,
    };
    if selected > 0 && counts.succeeded >= selected {
        let everyone = Position {
            canary_done: true,
            admitted: to_u32(selected),
            per_group: BTreeMap::new(),
        };
        return Step {
            wave: progressive_wave(spec, &everyone),
            position: everyone,
            state: State::Complete,
        };
    }
    let allowed = spec.max_failures.of(selected);
    let halted = if counts.failed > allowed {
        Some(format!(
            "{} clusters failed on this revision, more than maxFailures ({allowed})",
            counts.failed
        ))
    } else {
        group_halted(spec, observed)
    };
    if let Some(reason) = halted {
        let mut step = hold(State::Halted(reason));
        if !position.canary_done {
            step.wave = canary_wave(spec, selected);
        }
        return step;
    }
    let held = if spec.paused {
        Some(State::Paused)
    } else if !observed.gates_open {
        Some(State::Gated)
    } else {
        None
    };
    if spec.strategy == Strategy::Canary && !position.canary_done {
        let done =
            observed.handed > 0 && counts.succeeded >= observed.handed && position.admitted > 0;
        if !done {
            let wave = canary_wave(spec, selected);
            // A canary that has not started waits for the gates too.
            if position.admitted == 0 && held.is_some() {
                return Step {
                    wave: progressive_wave(spec, &Position::default()),
                    position: position.clone(),
                    state: held.unwrap_or(State::Progressing),
                };
            }
            return Step {
                wave,
                position: Position {
                    canary_done: false,
                    admitted: to_u32(observed.handed),
                    per_group: BTreeMap::new(),
                },
                state: held.unwrap_or(State::Progressing),
            };
        }
    }
    let position = Position {
        canary_done: true,
        ..position.clone()
    };
    if let Some(state) = held {
        return Step {
            wave: progressive_wave(spec, &position),
            position,
            state,
        };
    }
    let concurrency = spec.max_concurrency.of(selected).max(1);
    if counts.failed >= concurrency {
        let reason = format!(
            "{} failed clusters hold every place of maxConcurrency ({concurrency})",
            counts.failed
        );
        return Step {
            wave: progressive_wave(spec, &position),
            position,
            state: State::Halted(reason),
        };
    }
    let position = match spec.max_unavailable_per_group {
        Some(budget) => grouped_position(budget, position, observed, concurrency),
        None => {
            let wanted = counts.succeeded.saturating_add(concurrency).min(selected);
            Position {
                admitted: position.admitted.max(to_u32(wanted)),
                ..position
            }
        }
    };
    Step {
        wave: progressive_wave(spec, &position),
        position,
        state: State::Progressing,
    }
}

/// Why a group halts the rollout: its failed clusters hold every place
/// `maxUnavailablePerGroup` gives it.
fn group_halted(spec: &RolloutSpec, observed: &Observed) -> Option<String> {
    let budget = spec.max_unavailable_per_group?;
    observed.groups.iter().find_map(|group| {
        let places = budget.of(group.selected).max(1);
        (group.counts.failed >= places).then(|| {
            format!(
                "{} failed clusters below {} hold every place of maxUnavailablePerGroup ({places})",
                group.counts.failed, group.name
            )
        })
    })
}

/// The next position of a rollout with per-group budgets: each group (in
/// name order) may have as many clusters on the new revision as have
/// succeeded there plus its budget, while the clusters in flight (on it,
/// not done yet) across all groups stay within `concurrency`. A group
/// never shrinks.
fn grouped_position(
    budget: Amount,
    mut position: Position,
    observed: &Observed,
    concurrency: u64,
) -> Position {
    if observed.groups.is_empty() {
        // No group has reported yet (a wave keyed by another label, as a
        // canary's): nothing to plan from; the wave stays as it is.
        return position;
    }
    // Groups of another grouping (the spec changed) are forgotten.
    position
        .per_group
        .retain(|name, _| observed.groups.iter().any(|group| group.name == *name));
    let had = |position: &Position, group: &GroupObserved| {
        u64::from(position.per_group.get(&group.name).copied().unwrap_or(0))
    };
    let mut in_flight: u64 = observed
        .groups
        .iter()
        .map(|group| had(&position, group).saturating_sub(group.counts.succeeded))
        .sum();
    for group in &observed.groups {
        let before = had(&position, group);
        let places = budget.of(group.selected).max(1);
        let wanted = group
            .counts
            .succeeded
            .saturating_add(places)
            .min(group.selected);
        if wanted <= before {
            continue;
        }
        let start = before.max(group.counts.succeeded);
        let grow = wanted
            .saturating_sub(start)
            .min(concurrency.saturating_sub(in_flight));
        in_flight = in_flight.saturating_add(grow);
        let admitted = start.saturating_add(grow);
        if admitted > 0 {
            position
                .per_group
                .insert(group.name.clone(), to_u32(admitted));
        }
    }
    position.admitted = position
        .per_group
        .values()
        .fold(0u32, |sum, count| sum.saturating_add(*count));
    position
}

/// The wave a rollout at `position` hands down, as [`next_wave`] last
/// decided it: for a root that restarted and reads its position back.
pub fn wave_at(spec: &RolloutSpec, position: &Position) -> Wave {
    if spec.strategy == Strategy::Canary && !position.canary_done {
        if position.admitted == 0 {
            return progressive_wave(spec, &Position::default());
        }
        return canary_wave(spec, u64::from(u32::MAX));
    }
    progressive_wave(spec, position)
}

fn progressive_wave(spec: &RolloutSpec, position: &Position) -> Wave {
    let grouped = spec.max_unavailable_per_group.is_some() && !position.per_group.is_empty();
    match &spec.group_label {
        // Groups by label: the wave is keyed by it, each value's number
        // given, and every relay splits each over its children.
        Some(label) if grouped => Wave {
            key_label: Some(label.clone()),
            total: position.admitted,
            per_value: position.per_group.clone(),
            per_value_cap: None,
            per_child: BTreeMap::new(),
        },
        _ => Wave {
            key_label: spec.group_label.clone().or_else(|| spec.order_by.clone()),
            total: position.admitted,
            per_value: BTreeMap::new(),
            per_value_cap: None,
            per_child: if grouped {
                position.per_group.clone()
            } else {
                BTreeMap::new()
            },
        },
    }
}

/// One cluster per value of `canary_by`, or a single cluster without it.
fn canary_wave(spec: &RolloutSpec, selected: u64) -> Wave {
    Wave {
        key_label: spec.canary_by.clone(),
        total: if spec.canary_by.is_some() {
            to_u32(selected)
        } else {
            1
        },
        per_value: BTreeMap::new(),
        per_value_cap: spec.canary_by.as_ref().map(|_| 1),
        per_child: BTreeMap::new(),
    }
}

/// The value a cluster with `labels` has for a wave ordered by `key_label`.
pub fn key_of<'a>(labels: &'a impl LabelLookup, key_label: &str) -> &'a str {
    labels.label(key_label).unwrap_or(UNLABELLED)
}

/// How many clusters of `aggregate` matching `selector` (`None`: all) a
/// wave can reach, per value of `key_label` when set ([`UNLABELLED`] for
/// those without it).
pub fn wave_supply(
    aggregate: &Aggregate,
    selector: Option<&LabelSelector>,
    key_label: Option<&str>,
) -> Supply {
    let mut supply = Supply::default();
    for (labels, count) in aggregate.iter() {
        if selector.is_some_and(|selector| !crate::selector::matches(selector, labels)) {
            continue;
        }
        add_to_supply(&mut supply, labels, key_label, count);
    }
    supply
}

/// Counts `count` clusters with `labels` into `supply`.
pub fn add_to_supply(
    supply: &mut Supply,
    labels: &impl LabelLookup,
    key_label: Option<&str>,
    count: u64,
) {
    supply.total = supply.total.saturating_add(count);
    if let Some(key_label) = key_label {
        let per_value = supply
            .per_value
            .entry(key_of(labels, key_label).to_string())
            .or_default();
        *per_value = per_value.saturating_add(count);
    }
}

/// The order of a wave's values: ascending, numerically when every value
/// is a number, [`UNLABELLED`] last.
pub fn compare_values(a: &str, b: &str, numeric: bool) -> Ordering {
    match (a == UNLABELLED, b == UNLABELLED) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        (false, false) => {}
    }
    if numeric {
        if let (Ok(x), Ok(y)) = (a.parse::<f64>(), b.parse::<f64>()) {
            return x.total_cmp(&y).then_with(|| a.cmp(b));
        }
    }
    a.cmp(b)
}

/// The values of `supply` in wave order.
pub fn ordered_values(supply: &Supply) -> Vec<&str> {
    let numeric = supply
        .per_value
        .keys()
        .filter(|value| *value != UNLABELLED)
        .all(|value| value.parse::<f64>().is_ok_and(f64::is_finite));
    let mut values: Vec<&str> = supply.per_value.keys().map(String::as_str).collect();
    values.sort_by(|a, b| compare_values(a, b, numeric));
    values
}

/// A wave's counts per value, derived from its total over `supply`: the
/// first values in wave order first, each at most its supply and the
/// wave's cap.
pub fn derive(wave: &Wave, supply: &Supply) -> BTreeMap<String, u32> {
    let mut left = u64::from(wave.total);
    let cap = wave.per_value_cap.map_or(u64::MAX, u64::from);
    let mut per_value = BTreeMap::new();
    for value in ordered_values(supply) {
        if left == 0 {
            break;
        }
        let amount = supply.per_value[value].min(cap).min(left);
        if amount > 0 {
            per_value.insert(value.to_string(), to_u32(amount));
            left -= amount;
        }
    }
    per_value
}

/// One child as [`split_wave`] sees it: the clusters of its subtree the
/// placement selects, per value of the wave's label.
#[derive(Debug, Clone)]
pub struct WaveChild<'a> {
    /// The child's name.
    pub name: &'a str,
    /// Its selected clusters.
    pub supply: Supply,
}

/// Splits `wave` over `children`, keeping what each had in `previous` as
/// far as its clusters and the wave allow. Every child gets a wave, of zero
/// if nothing of it is theirs: a selected cluster outside the wave runs the
/// previous revision.
pub fn split_wave(
    placement_key: &str,
    wave: &Wave,
    children: &[WaveChild<'_>],
    previous: Option<&BTreeMap<String, Wave>>,
) -> BTreeMap<String, Wave> {
    let mut order: Vec<(u64, usize)> = children
        .iter()
        .enumerate()
        .map(|(index, child)| (child_rank(placement_key, child.name), index))
        .collect();
    order.sort_unstable();
    let ordered: Vec<&WaveChild<'_>> = order.iter().map(|(_, index)| &children[*index]).collect();
    let had = |child: &WaveChild<'_>, value: Option<&str>| -> u64 {
        let Some(previous) = previous.and_then(|previous| previous.get(child.name)) else {
            return 0;
        };
        match value {
            // Keyed differently last time (a canary before the waves):
            // what it had in all still counts.
            Some(value) if previous.key_label == wave.key_label => {
                previous.per_value.get(value).copied().unwrap_or(0).into()
            }
            _ => previous.total.into(),
        }
    };
    let mut shares: BTreeMap<String, Wave> = children
        .iter()
        .map(|child| {
            let share = Wave {
                key_label: wave.key_label.clone(),
                total: 0,
                per_value: BTreeMap::new(),
                per_value_cap: wave.per_value_cap,
                per_child: BTreeMap::new(),
            };
            (child.name.to_string(), share)
        })
        .collect();
    if wave.key_label.is_some() {
        let per_value = if wave.per_value.is_empty() {
            let mut own = Supply::default();
            children.iter().for_each(|child| own.merge(&child.supply));
            derive(wave, &own)
        } else {
            wave.per_value.clone()
        };
        for (value, amount) in &per_value {
            let capacities: Vec<u64> = ordered
                .iter()
                .map(|child| child.supply.per_value.get(value).copied().unwrap_or(0))
                .collect();
            let before: Vec<u64> = ordered
                .iter()
                .map(|child| had(child, Some(value)))
                .collect();
            let amounts = keep_then_fill(u64::from(*amount), &capacities, &before);
            for (child, amount) in ordered.iter().zip(amounts) {
                if amount > 0 {
                    if let Some(share) = shares.get_mut(child.name) {
                        share.total = share.total.saturating_add(to_u32(amount));
                        share.per_value.insert(value.clone(), to_u32(amount));
                    }
                }
            }
        }
    } else {
        let capacities: Vec<u64> = ordered.iter().map(|child| child.supply.total).collect();
        let before: Vec<u64> = ordered.iter().map(|child| had(child, None)).collect();
        let amounts = keep_then_fill(u64::from(wave.total), &capacities, &before);
        for (child, amount) in ordered.iter().zip(amounts) {
            if let Some(share) = shares.get_mut(child.name) {
                share.total = to_u32(amount);
            }
        }
    }
    shares
}

/// The agent's side: whether the cluster with `labels` runs the newest
/// revision under the wave its parent gave it.
pub fn leaf_in_wave(wave: &Wave, labels: &Labels) -> bool {
    match &wave.key_label {
        Some(key_label) if !wave.per_value.is_empty() => wave
            .per_value
            .get(key_of(labels, key_label))
            .is_some_and(|count| *count > 0),
        _ => wave.total > 0,
    }
}

#[cfg(test)]
mod tests;
