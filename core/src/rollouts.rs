//! At the root: each staged placement's rollout, decided in the core.
//!
//! Which two revisions a placement's entry carries (the newest first, the
//! previous one second) and how many clusters its wave lets run the newest
//! are decided here, in one path: the placement controller hands each entry
//! with its [`RolloutInput`] ([`Core::roll_out`]); every time the root's
//! status is read, the core takes what the tree reported, decides the next
//! wave (`relaymesh_topology::rollout::next_wave`) and returns the entries
//! whose wave changed for the root's daemon to sign
//! ([`Core::advance_rollouts`]). The controller only writes the
//! [`Rollout`] each [`PlacementReport`] carries onto the Placement's
//! status, and reads it back after a restart ([`RolloutInput::recorded`]).

use std::collections::BTreeMap;

use relaymesh_protocol::{BundleId, SliceEntry, Target, Wave};
use relaymesh_topology::rollout::{
    next_wave, wave_at, Counts, GroupObserved, Observed, Position, RolloutSpec, State,
};

use crate::{Core, Now, PlacementReport};

/// How many past revisions a rollout's history keeps.
pub const HISTORY: usize = 10;

/// Where a rollout's newest revision stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waves go on.
    Progressing,
    /// `paused` is set.
    Paused,
    /// A gate is closed.
    Gated,
    /// Too many clusters failed.
    Halted,
    /// Every selected cluster runs it.
    Complete,
    /// `relayctl rollout promote`: every cluster runs it at once.
    Promoted,
    /// `relayctl rollout abort`: every cluster goes back to the previous.
    Aborted,
}

impl Phase {
    /// Every phase.
    pub const ALL: [Phase; 7] = [
        Phase::Progressing,
        Phase::Paused,
        Phase::Gated,
        Phase::Halted,
        Phase::Complete,
        Phase::Promoted,
        Phase::Aborted,
    ];

    /// Its name in `status.rollout.phase`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Progressing => "Progressing",
            Phase::Paused => "Paused",
            Phase::Gated => "Gated",
            Phase::Halted => "Halted",
            Phase::Complete => "Complete",
            Phase::Promoted => "Promoted",
            Phase::Aborted => "Aborted",
        }
    }

    /// The phase called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|phase| phase.name() == name)
    }

    /// Every cluster runs the revision from now on.
    fn finished(self) -> bool {
        matches!(self, Phase::Complete | Phase::Promoted)
    }
}

/// One past revision of a rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRecord {
    /// The revision (its bundle id).
    pub revision: String,
    /// How it ended: a finished [`Phase`]'s name, `Aborted` or
    /// `Superseded`.
    pub outcome: String,
    /// When it started (Unix milliseconds).
    pub started_ms: u64,
    /// When it ended (Unix milliseconds).
    pub at_ms: u64,
}

/// Where one placement's rollout stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    /// The newest revision (the bundle built from the root's objects).
    pub revision: BundleId,
    /// The previous revision, which the clusters outside the wave run.
    pub stable: Option<BundleId>,
    /// Where the waves stand.
    pub position: Position,
    /// The wave handed down; `None` once every cluster runs `revision`.
    pub wave: Option<Wave>,
    /// Where it stands.
    pub phase: Phase,
    /// Why, for people.
    pub message: String,
    /// When `revision` started (Unix milliseconds).
    pub started_ms: u64,
    /// The counts last reported for `revision`.
    pub counts: Counts,
    /// How many clusters the wave reached.
    pub reached: u64,
    /// The counts last reported for `revision` per group.
    pub groups: Vec<GroupObserved>,
    /// The past revisions, newest first, at most [`HISTORY`].
    pub history: Vec<HistoryRecord>,
}

/// What the placement controller says of a placement's rollout with its
/// entry: what only the API knows.
#[derive(Debug, Clone, Default)]
pub struct RolloutInput {
    /// `spec.rollout`.
    pub spec: RolloutSpec,
    /// The revision `relayctl rollout promote` named, if any.
    pub promote: Option<BundleId>,
    /// The revision `relayctl rollout abort` named, if any.
    pub abort: Option<BundleId>,
    /// The rollout as the Placement's status recorded it: where a root
    /// that restarted takes it up.
    pub recorded: Option<Rollout>,
}

/// Every placement's rollout at the root, by entry key, with its spec.
#[derive(Debug, Default)]
pub(crate) struct Rollouts {
    by_key: BTreeMap<String, (RolloutSpec, Rollout)>,
}

impl Rollouts {
    /// The entry to publish for a placement: with the previous revision
    /// and the wave while a staged rollout runs. `stored` says whether a
    /// bundle is still held.
    pub(crate) fn shape(
        &mut self,
        input: RolloutInput,
        mut entry: SliceEntry,
        stored: impl Fn(&BundleId) -> bool,
        now_ms: u64,
    ) -> SliceEntry {
        let Some(&current) = entry.bundles.first() else {
            return entry;
        };
        let RolloutInput {
            spec,
            promote,
            abort,
            recorded,
        } = input;
        let (kept_spec, rollout) = self.by_key.entry(entry.key.clone()).or_insert_with(|| {
            let rollout = recorded.unwrap_or_else(|| Rollout::fresh(&spec, current, now_ms));
            (spec.clone(), rollout)
        });
        *kept_spec = spec;
        let spec = &*kept_spec;
        if rollout.revision != current {
            rollout.new_revision(spec, current, now_ms);
        }
        if rollout.wave.is_some() {
            if !spec.is_staged() {
                rollout.finish(
                    Phase::Complete,
                    "strategy All: every cluster at once",
                    now_ms,
                );
            } else if promote == Some(rollout.revision) {
                rollout.finish(Phase::Promoted, "promoted: every cluster at once", now_ms);
            } else if abort == Some(rollout.revision)
                && rollout.stable.is_some()
                && rollout.phase != Phase::Aborted
            {
                rollout.phase = Phase::Aborted;
                rollout.message =
                    "aborting: the clusters go back to the previous revision".to_string();
                rollout.position = Position::default();
                rollout.wave = Some(wave_at(spec, &Position::default()));
                rollout.remember("Aborted", now_ms);
            }
        }
        if rollout.stable.is_some_and(|stable| !stored(&stable)) {
            tracing::warn!(placement = %entry.key, "the previous revision's bundle is gone: clusters outside the wave wait");
            rollout.stable = None;
        }
        rollout.apply_to(&mut entry);
        entry
    }

    /// Takes the status the tree reported for placement `key`: decides the
    /// next wave. True if the wave changed (the entry must be signed
    /// again).
    pub(crate) fn advance(
        &mut self,
        key: &str,
        report: &PlacementReport,
        gates_open: bool,
        now_ms: u64,
    ) -> bool {
        let Some((spec, rollout)) = self.by_key.get_mut(key) else {
            return false;
        };
        rollout.advance(spec, report, gates_open, now_ms)
    }

    /// Placement `key`'s rollout.
    pub(crate) fn get(&self, key: &str) -> Option<&Rollout> {
        self.by_key.get(key).map(|(_, rollout)| rollout)
    }

    /// Whether placement `key`'s rollout has `maxUnavailablePerGroup`: its
    /// report must carry each group's counts.
    pub(crate) fn grouped(&self, key: &str) -> bool {
        self.by_key
            .get(key)
            .is_some_and(|(spec, _)| spec.max_unavailable_per_group.is_some())
    }

    /// The keys of the rollouts that hand out a wave.
    pub(crate) fn waving(&self) -> Vec<String> {
        self.by_key
            .iter()
            .filter(|(_, (_, rollout))| rollout.wave.is_some())
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Forgets placement `key` (deleted).
    pub(crate) fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
    }
}

impl Rollout {
    /// A rollout of `current` that nobody recorded: in waves from the
    /// first if staged, else complete.
    fn fresh(spec: &RolloutSpec, current: BundleId, now_ms: u64) -> Self {
        let mut rollout = Rollout {
            revision: current,
            stable: None,
            position: Position::default(),
            wave: None,
            phase: Phase::Complete,
            message: String::new(),
            started_ms: now_ms,
            counts: Counts::default(),
            reached: 0,
            groups: Vec::new(),
            history: Vec::new(),
        };
        if spec.is_staged() {
            rollout.phase = Phase::Progressing;
            rollout.message = "starting".to_string();
            rollout.wave = Some(wave_at(spec, &rollout.position));
        }
        rollout
    }

    /// The revision the clusters are to run once the rollout is done:
    /// the newest, unless it was aborted, when every cluster goes back to
    /// the previous one.
    pub fn target(&self) -> BundleId {
        match (self.phase, self.stable) {
            (Phase::Aborted, Some(stable)) => stable,
            _ => self.revision,
        }
    }

    /// `entry` as this rollout has it: its wave, and while one runs both
    /// revisions (newest first).
    fn apply_to(&self, entry: &mut SliceEntry) {
        let Target::Placement(target) = &mut entry.target else {
            return;
        };
        target.wave = self.wave.clone().map(Box::new);
        entry.bundles = match (self.wave.is_some(), self.stable) {
            (true, Some(stable)) if stable != self.revision => vec![self.revision, stable],
            _ => vec![self.revision],
        };
    }

    /// A new newest revision: the one that completed becomes the previous;
    /// one still rolling out is superseded, and its waves go on with the
    /// new one (the clusters in them get it first). After an abort nobody
    /// runs the aborted revision: the waves start again.
    fn new_revision(&mut self, spec: &RolloutSpec, current: BundleId, now_ms: u64) {
        match self.phase {
            Phase::Complete | Phase::Promoted => {
                self.stable = Some(self.revision);
                self.position = Position::default();
            }
            Phase::Aborted => self.position = Position::default(),
            _ => self.remember("Superseded", now_ms),
        }
        self.revision = current;
        self.started_ms = now_ms;
        self.counts = Counts::default();
        if spec.is_staged() {
            self.phase = Phase::Progressing;
            self.message = "starting".to_string();
            self.wave = Some(wave_at(spec, &self.position));
        } else {
            self.finish(
                Phase::Complete,
                "strategy All: every cluster at once",
                now_ms,
            );
        }
    }

    fn advance(
        &mut self,
        spec: &RolloutSpec,
        report: &PlacementReport,
        gates_open: bool,
        now_ms: u64,
    ) -> bool {
        if self.wave.is_none() {
            // The counts stay as they were when it ended: agents report
            // none once there is no wave.
            return false;
        }
        self.counts = report
            .status
            .revisions
            .iter()
            .find(|counts| counts.revision == self.revision)
            .map(Counts::from)
            .unwrap_or_default();
        if self.phase == Phase::Aborted {
            self.message = self.abort_message(report);
            return false;
        }
        self.reached = report.wave.unwrap_or(0);
        self.groups = if spec.max_unavailable_per_group.is_some() {
            groups_of(spec, self.revision, report)
        } else {
            Vec::new()
        };
        let observed = Observed {
            selected: report.selected,
            handed: self.reached,
            counts: self.counts,
            gates_open,
            groups: self.groups.clone(),
        };
        let step = next_wave(spec, &self.position, &observed);
        self.position = step.position;
        let (phase, message) = match step.state {
            State::Progressing => (Phase::Progressing, self.progress_message(report.selected)),
            State::Paused => (Phase::Paused, "paused: no new wave starts".to_string()),
            State::Gated => (
                Phase::Gated,
                format!("waiting for the gates {} to be True", spec.gates.join(", ")),
            ),
            State::Halted(reason) => (Phase::Halted, format!("halted: {reason}")),
            State::Complete => {
                let message = format!("all {} clusters run the revision", report.selected);
                self.finish(Phase::Complete, &message, now_ms);
                return true;
            }
        };
        self.phase = phase;
        self.message = message;
        let changed = self.wave.as_ref() != Some(&step.wave);
        if changed {
            tracing::info!(wave = step.wave.total, phase = phase.name(), "rollout wave");
            self.wave = Some(step.wave);
        }
        changed
    }

    /// Said only once the clusters say it: each back on the previous
    /// revision, and ready on it.
    fn abort_message(&self, report: &PlacementReport) -> String {
        let back = self
            .stable
            .and_then(|stable| {
                report
                    .status
                    .applied_revisions
                    .iter()
                    .find(|applied| applied.revision == stable)
            })
            .map_or(0, |applied| applied.counts.ready);
        if back >= report.selected {
            "aborted: every cluster runs the previous revision".to_string()
        } else {
            format!(
                "aborting: {back} of {} clusters back on the previous revision and ready",
                report.selected
            )
        }
    }

    /// Every cluster runs the newest revision from now on.
    fn finish(&mut self, phase: Phase, message: &str, now_ms: u64) {
        debug_assert!(phase.finished());
        self.phase = phase;
        self.message = message.to_string();
        self.wave = None;
        self.stable = Some(self.revision);
        self.remember(phase.name(), now_ms);
    }

    fn remember(&mut self, outcome: &str, now_ms: u64) {
        self.history.insert(
            0,
            HistoryRecord {
                revision: self.revision.to_string(),
                outcome: outcome.to_string(),
                started_ms: self.started_ms,
                at_ms: now_ms,
            },
        );
        self.history.truncate(HISTORY);
    }

    fn progress_message(&self, selected: u64) -> String {
        let counts = self.counts;
        format!(
            "{} of {selected} clusters done, {} updating, {} failed, {} waiting",
            counts.succeeded, counts.updating, counts.failed, counts.waiting
        )
    }
}

/// The groups of a rollout with `maxUnavailablePerGroup`, each with its
/// selected clusters and its counts for `revision`: the root's children
/// (from what each reported), or the values of the group label (from the
/// counts the clusters report per value, and the root's inventory).
fn groups_of(
    spec: &RolloutSpec,
    revision: BundleId,
    report: &PlacementReport,
) -> Vec<GroupObserved> {
    let Some(label) = &spec.group_label else {
        return report
            .parts
            .iter()
            .map(|part| GroupObserved {
                name: part.child.clone(),
                selected: part.selected,
                counts: part
                    .revisions
                    .iter()
                    .find(|counts| counts.revision == revision)
                    .map(Counts::from)
                    .unwrap_or_default(),
            })
            .collect();
    };
    let Some((keyed_by, selected)) = report.by_value.as_ref().filter(|(keyed, _)| keyed == label)
    else {
        // The wave is not keyed by the label yet (a canary's, or the
        // first): no group has started.
        return Vec::new();
    };
    selected
        .iter()
        .map(|(value, selected)| GroupObserved {
            name: value.clone(),
            selected: *selected,
            counts: report
                .status
                .revision_groups
                .iter()
                .find(|group| {
                    group.label == *keyed_by
                        && group.value == *value
                        && group.counts.revision == revision
                })
                .map(|group| Counts::from(&group.counts))
                .unwrap_or_default(),
        })
        .collect()
}

impl Core {
    /// At the root: `entry` (the placement controller's, not signed yet)
    /// as its rollout has it, with the previous revision and the wave
    /// while a staged rollout runs. Called before [`Core::hand_over`] and
    /// the root's signature.
    pub fn roll_out(&mut self, now: Now, entry: SliceEntry, input: RolloutInput) -> SliceEntry {
        let held = &self.bundles.held;
        self.rollouts
            .shape(input, entry, |id| held.contains(id), now.unix_ms)
    }

    /// At the root: decides the next wave of every rollout from what the
    /// tree reported; `gates_open` says, per placement with gates, whether
    /// every gate is a condition set `True` on the Placement (one missing
    /// is closed). Returns the entries whose wave or revisions changed, for
    /// the root's daemon to sign and upsert.
    pub fn advance_rollouts(
        &mut self,
        now: Now,
        gates_open: &BTreeMap<String, bool>,
    ) -> Vec<SliceEntry> {
        let mut changed = Vec::new();
        for key in self.rollouts.waving() {
            let Some(report) = self.placement_report(&key) else {
                continue;
            };
            let open = gates_open.get(&key).copied().unwrap_or(true);
            if !self.rollouts.advance(&key, &report, open, now.unix_ms) {
                continue;
            }
            // While a handover runs, the held entry names the clusters it
            // leaves: the wave goes on the entry the spec says, handed
            // over again.
            let base = self
                .root_handovers
                .base(&key)
                .or_else(|| self.slice.entry(&key))
                .cloned();
            let (Some(rollout), Some(mut entry)) = (self.rollouts.get(&key), base) else {
                continue;
            };
            rollout.apply_to(&mut entry);
            changed.push(self.hand_over(now, entry));
        }
        changed
    }

    /// Placement `key`'s rollout, as the core decided it.
    pub fn rollout(&self, key: &str) -> Option<&Rollout> {
        self.rollouts.get(key)
    }

    /// Forgets placement `key`'s rollout (the placement was deleted).
    pub fn forget_rollout(&mut self, key: &str) {
        self.rollouts.forget(key);
    }
}

#[cfg(test)]
mod tests;
