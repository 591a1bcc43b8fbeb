//! `relayctl rollout`: a staged placement's rollout, read from and steered
//! through the Placement itself (docs/api.md, "Rollouts"): pause and
//! resume set `spec.rollout.paused`; promote and abort set an annotation
//! naming the revision they are for, which the root acts on.

use serde_json::{json, Value};

use super::{Client, ClientError, GROUP_PATH, REQUEST_TIMEOUT};

/// The annotation `promote` sets (the root's `relaymesh.dev/rollout-promote`).
pub const PROMOTE_ANNOTATION: &str = "relaymesh.dev/rollout-promote";
/// The annotation `abort` sets (the root's `relaymesh.dev/rollout-abort`).
pub const ABORT_ANNOTATION: &str = "relaymesh.dev/rollout-abort";

/// Why a rollout command cannot be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RolloutError {
    /// The placement goes to every cluster at once.
    #[error("placement {0} has no staged rollout (spec.rollout.strategy is All or absent): set Progressive or Canary")]
    NotStaged(String),
    /// The root has not recorded a rollout yet.
    #[error(
        "placement {0} has no rollout status yet: the root writes it once the placement is built"
    )]
    NoStatus(String),
    /// Nothing is rolling out.
    #[error("placement {placement}: revision {revision} is {phase}, nothing to {command}")]
    Finished {
        /// `namespace/name`.
        placement: String,
        /// The revision.
        revision: String,
        /// Its phase.
        phase: String,
        /// The command.
        command: &'static str,
    },
    /// Abort needs a previous revision to go back to.
    #[error("placement {0}: the revision rolling out is its first, there is nothing to go back to (pause it instead, or delete the placement)")]
    NoPrevious(String),
    /// The API refused or failed.
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl Client {
    /// Applies a JSON merge patch to Placement `name` in `namespace`.
    pub async fn patch_placement(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ClientError> {
        let path = format!("{GROUP_PATH}/namespaces/{namespace}/placements/{name}");
        let body =
            serde_json::to_vec(patch).map_err(|error| ClientError::Decode(error.to_string()))?;
        let request = self
            .http
            .patch(self.url(&path))
            .header("Content-Type", "application/merge-patch+json")
            .body(body)
            .timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    /// Pauses (`true`) or resumes the rollout of Placement `name`.
    pub async fn pause_rollout(
        &self,
        namespace: &str,
        name: &str,
        paused: bool,
    ) -> Result<Value, RolloutError> {
        self.staged(namespace, name).await?;
        let paused = if paused {
            Value::Bool(true)
        } else {
            Value::Null
        };
        let patch = json!({"spec": {"rollout": {"paused": paused}}});
        Ok(self.patch_placement(namespace, name, &patch).await?)
    }

    /// Promotes (every cluster at once) or aborts (every cluster back to
    /// the previous revision) the revision now rolling out.
    pub async fn steer_rollout(
        &self,
        namespace: &str,
        name: &str,
        abort: bool,
    ) -> Result<Value, RolloutError> {
        let placement = self.staged(namespace, name).await?;
        let id = format!("{namespace}/{name}");
        let rollout = &placement["status"]["rollout"];
        let revision = rollout["revision"]
            .as_str()
            .ok_or_else(|| RolloutError::NoStatus(id.clone()))?;
        let phase = rollout["phase"].as_str().unwrap_or_default();
        let command = if abort { "abort" } else { "promote" };
        if matches!(phase, "Complete" | "Promoted" | "Aborted") {
            return Err(RolloutError::Finished {
                placement: id,
                revision: revision.to_string(),
                phase: phase.to_string(),
                command,
            });
        }
        if abort && rollout["previousRevision"].as_str().is_none() {
            return Err(RolloutError::NoPrevious(id));
        }
        let annotation = if abort {
            ABORT_ANNOTATION
        } else {
            PROMOTE_ANNOTATION
        };
        let patch = json!({"metadata": {"annotations": {annotation: revision}}});
        Ok(self.patch_placement(namespace, name, &patch).await?)
    }

    async fn staged(&self, namespace: &str, name: &str) -> Result<Value, RolloutError> {
        let placement = self
            .placements(Some(namespace), Some(name))
            .await?
            .pop()
            .unwrap_or(Value::Null);
        let strategy = placement["spec"]["rollout"]["strategy"]
            .as_str()
            .unwrap_or("All");
        if strategy == "All" {
            return Err(RolloutError::NotStaged(format!("{namespace}/{name}")));
        }
        Ok(placement)
    }
}

/// `relayctl rollout status` as text: the phase and why, the revisions,
/// and the clusters by how they are doing with the newest (per group with
/// `maxUnavailablePerGroup`).
pub fn render_status(placement: &Value) -> String {
    let rollout = &placement["status"]["rollout"];
    let text = |field: &str| rollout[field].as_str().unwrap_or("-").to_string();
    let count = |field: &str| rollout["clusters"][field].as_u64().unwrap_or(0);
    let short = |revision: String| revision.chars().take(12).collect::<String>();
    let mut out = format!(
        "placement {}/{}: {} ({})\n",
        placement["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default(),
        placement["metadata"]["name"].as_str().unwrap_or_default(),
        text("phase"),
        text("strategy"),
    );
    out.push_str(&format!("  {}\n", text("message")));
    out.push_str(&format!(
        "  revision {} (previous {}), wave {} of {} selected\n",
        short(text("revision")),
        short(text("previousRevision")),
        rollout["reached"].as_u64().unwrap_or(0),
        placement["status"]["clusters"]["selected"]
            .as_u64()
            .unwrap_or(0),
    ));
    out.push_str(&format!(
        "  clusters: {} succeeded, {} updating, {} failed, {} waiting\n",
        count("succeeded"),
        count("updating"),
        count("failed"),
        count("waiting"),
    ));
    for group in rollout["groups"].as_array().into_iter().flatten() {
        let number = |field: &str| group[field].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "  group {}: {} of {} admitted, {} succeeded, {} updating, {} failed\n",
            group["name"].as_str().unwrap_or("-"),
            number("admitted"),
            number("selected"),
            number("succeeded"),
            number("updating"),
            number("failed"),
        ));
    }
    out
}

/// `relayctl rollout history` as text: the newest first.
pub fn render_history(placement: &Value) -> String {
    let rows: Vec<Vec<String>> = std::iter::once(vec![
        "REVISION".to_string(),
        "OUTCOME".to_string(),
        "STARTED".to_string(),
        "ENDED".to_string(),
    ])
    .chain(
        placement["status"]["rollout"]["history"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|row| {
                let text = |field: &str| row[field].as_str().unwrap_or("-").to_string();
                vec![
                    text("revision").chars().take(12).collect(),
                    text("outcome"),
                    text("startedAt"),
                    text("at"),
                ]
            }),
    )
    .collect();
    super::resources::render_rows(&rows)
}
