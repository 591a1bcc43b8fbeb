//! The root's rollout controller: which two revisions a staged placement's
//! entry carries (the newest first, the previous one second), how many
//! clusters its wave lets run the newest, and the rollout's state on
//! `Placement.status.rollout`.
//!
//! The placement controller calls [`Rollouts::shape`] on every entry it
//! builds and [`Rollouts::advance`] with every status the tree reports; a
//! wave that grows makes it build the entries again. The decisions are
//! `relaymesh_topology::rollout`'s; this module keeps what they need
//! between calls, reads it back from the Placement's status after a
//! restart, and handles the commands `relayctl rollout` leaves as
//! annotations naming the revision they are for (so a command never
//! applies to a later revision than the one its author saw).

use std::collections::BTreeMap;
use std::str::FromStr;

use relaymesh_protocol::{BundleId, SliceEntry, Target, Wave};
use relaymesh_topology::rollout::{
    next_wave, wave_at, Counts, GroupObserved, Observed, Position, RolloutSpec, State, Strategy,
};
use serde_json::{json, Value};

use relaymesh_core::PlacementReport;

use crate::client::rollout::{ABORT_ANNOTATION, PROMOTE_ANNOTATION};

/// How many past revisions `status.rollout.history` keeps.
pub const HISTORY: usize = 10;

/// Where one placement's rollout stands.
#[derive(Debug, Clone, PartialEq)]
struct Rollout {
    /// The newest revision (the bundle built from the root's objects).
    revision: BundleId,
    /// The previous revision, which the clusters outside the wave run.
    stable: Option<BundleId>,
    position: Position,
    /// The wave handed down; `None` once every cluster runs `revision`.
    wave: Option<Wave>,
    phase: &'static str,
    message: String,
    started_at: String,
    /// The counts last reported for `revision`, and how many clusters the
    /// wave reached.
    counts: Counts,
    reached: u64,
    /// The counts last reported for `revision` per child of the root.
    groups: Vec<GroupObserved>,
    history: Vec<Value>,
}

/// Every placement's rollout, by slice key.
#[derive(Debug, Default)]
pub(super) struct Rollouts {
    by_key: BTreeMap<String, Rollout>,
}

impl Rollouts {
    /// The entry to publish for a placement built from `object`: with the
    /// previous revision and the wave while a staged rollout runs.
    /// `stored` says whether a bundle is still in the root's store (an
    /// error reading it is the caller's error).
    pub fn shape<E>(
        &mut self,
        object: &Value,
        spec: &RolloutSpec,
        mut entry: SliceEntry,
        stored: impl Fn(&BundleId) -> Result<bool, E>,
        now: &str,
    ) -> Result<SliceEntry, E> {
        let Some(&current) = entry.bundles.first() else {
            return Ok(entry);
        };
        let rollout = self
            .by_key
            .entry(entry.key.clone())
            .or_insert_with(|| load(&object["status"]["rollout"], spec, current, now));
        if rollout.revision != current {
            rollout.new_revision(spec, current, now);
        }
        let annotation = |name: &str| object["metadata"]["annotations"][name].as_str();
        let revision = rollout.revision.to_string();
        if rollout.wave.is_some() {
            if !spec.is_staged() {
                rollout.finish("Complete", "strategy All: every cluster at once", now);
            } else if annotation(PROMOTE_ANNOTATION) == Some(revision.as_str()) {
                rollout.finish("Promoted", "promoted: every cluster at once", now);
            } else if annotation(ABORT_ANNOTATION) == Some(revision.as_str())
                && rollout.stable.is_some()
                && rollout.phase != "Aborted"
            {
                rollout.phase = "Aborted";
                rollout.message =
                    "aborting: the clusters go back to the previous revision".to_string();
                rollout.position = Position::default();
                rollout.wave = Some(wave_at(spec, &Position::default()));
                rollout.remember("Aborted", now);
            }
        }
        let gone = match rollout.stable {
            Some(stable) => !stored(&stable)?,
            None => false,
        };
        if gone {
            tracing::warn!(placement = %entry.key, "the previous revision's bundle is gone: clusters outside the wave wait");
            rollout.stable = None;
        }
        if let (Some(wave), Target::Placement(target)) = (&rollout.wave, &mut entry.target) {
            target.wave = Some(Box::new(wave.clone()));
            if let Some(stable) = rollout.stable.filter(|stable| *stable != current) {
                entry.bundles = vec![current, stable];
            }
        }
        Ok(entry)
    }

    /// Takes the status the tree reported for placement `key`: decides the
    /// next wave. True if the wave changed (the entries must be rebuilt).
    pub fn advance(
        &mut self,
        key: &str,
        spec: &RolloutSpec,
        report: &PlacementReport,
        gates_open: bool,
        now: &str,
    ) -> bool {
        let Some(rollout) = self.by_key.get_mut(key) else {
            return false;
        };
        if rollout.wave.is_none() {
            // The counts stay as they were when it ended: agents report
            // none once there is no wave.
            return false;
        }
        rollout.counts = report
            .status
            .revisions
            .iter()
            .find(|counts| counts.revision == rollout.revision)
            .map(Counts::from)
            .unwrap_or_default();
        if rollout.phase == "Aborted" {
            // Said only once the clusters say it: each back on the previous
            // revision, and ready on it.
            let back = rollout
                .stable
                .and_then(|stable| {
                    report
                        .status
                        .applied_revisions
                        .iter()
                        .find(|applied| applied.revision == stable)
                })
                .map_or(0, |applied| applied.counts.ready);
            rollout.message = if back >= report.selected {
                "aborted: every cluster runs the previous revision".to_string()
            } else {
                format!(
                    "aborting: {back} of {} clusters back on the previous revision and ready",
                    report.selected
                )
            };
            return false;
        }
        rollout.reached = report.wave.unwrap_or(0);
        rollout.groups = if spec.max_unavailable_per_group.is_some() {
            groups_of(spec, rollout.revision, report)
        } else {
            Vec::new()
        };
        let observed = Observed {
            selected: report.selected,
            handed: rollout.reached,
            counts: rollout.counts,
            gates_open,
            groups: rollout.groups.clone(),
        };
        let step = next_wave(spec, &rollout.position, &observed);
        rollout.position = step.position;
        let (phase, message) = match step.state {
            State::Progressing => ("Progressing", progress_message(rollout, report.selected)),
            State::Paused => ("Paused", "paused: no new wave starts".to_string()),
            State::Gated => (
                "Gated",
                format!("waiting for the gates {} to be True", spec.gates.join(", ")),
            ),
            State::Halted(reason) => ("Halted", format!("halted: {reason}")),
            State::Complete => {
                rollout.finish(
                    "Complete",
                    &format!("all {} clusters run the revision", report.selected),
                    now,
                );
                return true;
            }
        };
        rollout.phase = phase;
        rollout.message = message;
        let changed = rollout.wave.as_ref() != Some(&step.wave);
        if changed {
            tracing::info!(
                placement = key,
                wave = step.wave.total,
                phase,
                "rollout wave"
            );
            rollout.wave = Some(step.wave);
        }
        changed
    }

    /// `status.rollout` for placement `key`, if it has a staged rollout or
    /// a history.
    pub fn render(&self, key: &str, spec: &RolloutSpec) -> Option<Value> {
        let rollout = self.by_key.get(key)?;
        if !spec.is_staged() && rollout.history.is_empty() {
            return None;
        }
        let strategy = match spec.strategy {
            Strategy::All => "All",
            Strategy::Progressive => "Progressive",
            Strategy::Canary => "Canary",
        };
        let mut status = json!({
            "strategy": strategy,
            "revision": rollout.revision.to_string(),
            "phase": rollout.phase,
            "message": rollout.message,
            "startedAt": rollout.started_at,
            "canaryDone": rollout.position.canary_done,
            "admitted": rollout.position.admitted,
            "reached": rollout.reached,
            "clusters": {
                "waiting": rollout.counts.waiting,
                "updating": rollout.counts.updating,
                "succeeded": rollout.counts.succeeded,
                "failed": rollout.counts.failed,
            },
            "history": rollout.history,
        });
        if let Some(stable) = rollout.stable {
            status["previousRevision"] = Value::from(stable.to_string());
        }
        if spec.max_unavailable_per_group.is_some() {
            status["groups"] = rollout
                .groups
                .iter()
                .map(|group| {
                    json!({
                        "name": group.name,
                        "selected": group.selected,
                        "admitted": rollout.position.per_group.get(&group.name).copied().unwrap_or(0),
                        "updating": group.counts.updating,
                        "succeeded": group.counts.succeeded,
                        "failed": group.counts.failed,
                    })
                })
                .collect();
        }
        Some(status)
    }

    /// The revision placement `key`'s clusters are to run once its rollout
    /// is done: `newest`, the first bundle of its entry, unless its rollout
    /// was aborted, when every cluster goes back to the previous one.
    pub fn target(&self, key: &str, newest: BundleId) -> BundleId {
        match self.by_key.get(key) {
            Some(rollout) if rollout.phase == "Aborted" && rollout.revision == newest => {
                rollout.stable.unwrap_or(newest)
            }
            _ => newest,
        }
    }

    /// Forgets the placements not in `keys` (deleted).
    pub fn retain(&mut self, keys: &std::collections::BTreeSet<String>) {
        self.by_key.retain(|key, _| keys.contains(key));
    }
}

impl Rollout {
    /// A new newest revision: the one that completed becomes the previous;
    /// one still rolling out is superseded, and its waves go on with the
    /// new one (the clusters in them get it first). After an abort nobody
    /// runs the aborted revision: the waves start again.
    fn new_revision(&mut self, spec: &RolloutSpec, current: BundleId, now: &str) {
        match self.phase {
            "Complete" | "Promoted" => {
                self.stable = Some(self.revision);
                self.position = Position::default();
            }
            "Aborted" => self.position = Position::default(),
            _ => self.remember("Superseded", now),
        }
        self.revision = current;
        self.started_at = now.to_string();
        self.counts = Counts::default();
        if spec.is_staged() {
            self.phase = "Progressing";
            self.message = "starting".to_string();
            self.wave = Some(wave_at(spec, &self.position));
        } else {
            self.finish("Complete", "strategy All: every cluster at once", now);
        }
    }

    /// Every cluster runs the newest revision from now on.
    fn finish(&mut self, phase: &'static str, message: &str, now: &str) {
        self.phase = phase;
        self.message = message.to_string();
        self.wave = None;
        self.stable = Some(self.revision);
        self.remember(phase, now);
    }

    fn remember(&mut self, outcome: &str, now: &str) {
        self.history.insert(
            0,
            json!({
                "revision": self.revision.to_string(),
                "outcome": outcome,
                "startedAt": self.started_at,
                "at": now,
            }),
        );
        self.history.truncate(HISTORY);
    }
}

fn progress_message(rollout: &Rollout, selected: u64) -> String {
    let counts = rollout.counts;
    format!(
        "{} of {selected} clusters done, {} updating, {} failed, {} waiting",
        counts.succeeded, counts.updating, counts.failed, counts.waiting
    )
}

/// A rollout as the Placement's status last recorded it, or a new one
/// for `current`.
fn load(status: &Value, spec: &RolloutSpec, current: BundleId, now: &str) -> Rollout {
    let revision = |field: &str| {
        status[field]
            .as_str()
            .and_then(|text| BundleId::from_str(text).ok())
    };
    let fresh = || {
        let mut rollout = Rollout {
            revision: current,
            stable: None,
            position: Position::default(),
            wave: None,
            phase: "Complete",
            message: String::new(),
            started_at: now.to_string(),
            counts: Counts::default(),
            reached: 0,
            groups: Vec::new(),
            history: Vec::new(),
        };
        if spec.is_staged() {
            rollout.phase = "Progressing";
            rollout.message = "starting".to_string();
            rollout.wave = Some(wave_at(spec, &rollout.position));
        }
        rollout
    };
    let Some(recorded) = revision("revision") else {
        return fresh();
    };
    let phase = match status["phase"].as_str() {
        Some("Complete") => "Complete",
        Some("Promoted") => "Promoted",
        Some("Aborted") => "Aborted",
        Some("Paused") => "Paused",
        Some("Gated") => "Gated",
        Some("Halted") => "Halted",
        _ => "Progressing",
    };
    let count = |value: &Value| value.as_u64().and_then(|count| u32::try_from(count).ok());
    let position = Position {
        canary_done: status["canaryDone"].as_bool().unwrap_or(false),
        admitted: count(&status["admitted"]).unwrap_or(0),
        per_group: status["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|group| {
                Some((
                    group["name"].as_str()?.to_string(),
                    count(&group["admitted"])?,
                ))
            })
            .collect(),
    };
    let finished = matches!(phase, "Complete" | "Promoted");
    Rollout {
        revision: recorded,
        stable: revision("previousRevision"),
        wave: (!finished).then(|| wave_at(spec, &position)),
        position,
        phase,
        message: status["message"].as_str().unwrap_or_default().to_string(),
        started_at: status["startedAt"].as_str().unwrap_or(now).to_string(),
        counts: Counts::default(),
        reached: 0,
        groups: Vec::new(),
        history: status["history"].as_array().cloned().unwrap_or_default(),
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

/// Whether every gate of `spec` is a condition with status `True` on the
/// Placement's `status`.
pub fn gates_open(spec: &RolloutSpec, status: &Value) -> bool {
    spec.gates.iter().all(|gate| {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|condition| condition["type"] == gate.as_str() && condition["status"] == "True")
    })
}

#[cfg(test)]
mod tests;
