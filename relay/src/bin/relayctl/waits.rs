//! `relayctl`'s waiting: the polls behind `watch`, `drain --wait`, `move
//! --wait` and `rollout … --wait`, each returning only once what it waited
//! for shows in the statuses `relayctl status` reads (docs/operations.md).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_root::client::watch::{self, Verdict};
use relaymesh_root::client::{settle, status, Client};

/// Polls the root's clusters until `cluster` is drained.
pub(super) async fn wait_drained(
    client: &Client,
    cluster: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let clusters = client.clusters().await.context("cannot list clusters")?;
        let drained = clusters.iter().any(|found| {
            found["metadata"]["name"].as_str() == Some(cluster)
                && found["status"]["drain"] == "Drained"
        });
        if drained {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{cluster:?} is not drained after {}: are the clusters replacing it ready?",
                humantime::format_duration(timeout)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub(super) async fn wait_settled(
    client: &Client,
    node: &str,
    timeout: Duration,
) -> anyhow::Result<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let moves = client.moves().await.context("cannot list moves")?;
        let moved = moves
            .into_iter()
            .find(|moved| moved["spec"]["node"].as_str() == Some(node));
        if let Some(moved) = moved.filter(|moved| moved["status"]["state"] == "Settled") {
            return Ok(moved);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the move of {node:?} is not settled after {}: is the agent connected, and its old parent reachable?",
                humantime::format_duration(timeout)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// How many clusters every placement's status hears from now
/// ([`relaymesh_root::client::settle`]).
/// Placement `namespace/name` as the root serves it now (`Null` if gone).
pub(super) async fn placement(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<serde_json::Value> {
    Ok(client
        .placements(Some(namespace), Some(name))
        .await
        .with_context(|| format!("cannot read placement {namespace}/{name}"))?
        .pop()
        .unwrap_or_default())
}

/// [`heard_now`] if the command will `wait`, before it acts.
pub(super) async fn heard_if(client: &Client, wait: bool) -> anyhow::Result<Option<settle::Heard>> {
    Ok(match wait {
        true => Some(heard_now(client).await?),
        false => None,
    })
}

pub(super) async fn heard_now(client: &Client) -> anyhow::Result<settle::Heard> {
    let placements = client
        .placements(None, None)
        .await
        .context("cannot list placements")?;
    Ok(settle::heard(&placements))
}

/// Polls the placements until their statuses agree with what `what` waited
/// for ([`settle::unsettled`]), or `deadline`.
pub(super) async fn wait_statuses(
    client: &Client,
    before: &settle::Heard,
    selection: settle::Selection,
    deadline: tokio::time::Instant,
    what: &str,
) -> anyhow::Result<()> {
    loop {
        let placements = client
            .placements(None, None)
            .await
            .context("cannot list placements")?;
        let reasons = settle::unsettled(before, &placements, selection);
        if reasons.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{what} is done, but the placements' statuses do not show it yet: {}",
                reasons.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `relayctl watch`: polls the placement's status until a verdict or the
/// timeout.
pub(super) async fn watch(
    client: &Client,
    namespace: &str,
    placement: &str,
    timeout: std::time::Duration,
    by: Option<&str>,
) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    const POLL: std::time::Duration = std::time::Duration::from_millis(500);
    let deadline = tokio::time::Instant::now() + timeout;
    let style =
        || indicatif::ProgressStyle::with_template("{prefix:>12} {bar:40} {pos}/{len} {msg}");
    let bars = std::io::stderr()
        .is_terminal()
        .then(indicatif::MultiProgress::new);
    let bar = bars.as_ref().map(|bars| {
        let bar = bars.add(indicatif::ProgressBar::new(0));
        if let Ok(style) = style() {
            bar.set_style(style);
        }
        bar.set_prefix("all");
        bar
    });
    let mut group_bars: BTreeMap<String, indicatif::ProgressBar> = BTreeMap::new();
    let mut group_lines: BTreeMap<String, String> = BTreeMap::new();
    let mut last = String::new();
    loop {
        let object = self::placement(client, namespace, placement).await?;
        if let Some(label) = by {
            let named = status::grouped_by(&object);
            if !named.iter().any(|named| named == label) {
                bail!(status::GroupError::NotGrouped {
                    placement: format!("{namespace}/{placement}"),
                    label: label.to_string(),
                });
            }
        }
        let summary = status::summary(&object);
        let line = watch::progress_line(&summary);
        match &bar {
            Some(bar) => {
                bar.set_length(summary["selected"].as_u64().unwrap_or(0));
                bar.set_position(summary["ready"].as_u64().unwrap_or(0));
                bar.set_message(line.clone());
            }
            None if line != last => println!("{line}"),
            None => {}
        }
        last = line;
        let rows = by
            .and_then(|label| status::groups_by(&summary, label).ok())
            .unwrap_or_default();
        for group in watch::group_progress(rows) {
            match &bars {
                Some(bars) => {
                    let bar = group_bars.entry(group.name.clone()).or_insert_with(|| {
                        let bar = bars.add(indicatif::ProgressBar::new(0));
                        if let Ok(style) = style() {
                            bar.set_style(style);
                        }
                        bar.set_prefix(group.name.clone());
                        bar
                    });
                    bar.set_length(group.clusters);
                    bar.set_position(group.ready);
                }
                None => {
                    if group_lines.get(&group.name) != Some(&group.line) {
                        println!("  {}", group.line);
                        group_lines.insert(group.name.clone(), group.line);
                    }
                }
            }
        }
        let verdict = watch::verdict(&summary);
        if verdict != Verdict::Waiting {
            for bar in bar.iter().chain(group_bars.values()) {
                bar.finish();
            }
        }
        match verdict {
            Verdict::Ready => {
                println!("placement {namespace}/{placement} is ready: {last}");
                return Ok(());
            }
            Verdict::Failed(why) => bail!("placement {namespace}/{placement} failed: {why}"),
            Verdict::Waiting if tokio::time::Instant::now() >= deadline => {
                if let Some(bar) = &bar {
                    bar.abandon();
                }
                bail!(
                    "placement {namespace}/{placement} not ready after {}: {last}",
                    humantime::format_duration(timeout)
                )
            }
            Verdict::Waiting => tokio::time::sleep(POLL).await,
        }
    }
}

/// `relayctl rollout VERB --wait`: polls the placement until what `verb`
/// promised shows in its status ([`rollout_done`]).
pub(super) async fn wait_rollout(
    client: &Client,
    namespace: &str,
    name: &str,
    verb: &str,
    revision: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let placement = placement(client, namespace, name).await?;
        let summary = status::summary(&placement);
        if rollout_done(&summary, verb, revision) {
            return Ok(());
        }
        if let Verdict::Failed(why) = watch::verdict(&summary) {
            if summary["revision"] == revision {
                bail!("rollout {verb} of {namespace}/{name}: {why}");
            }
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "rollout {verb} of {namespace}/{name} not done after {}: {}",
                humantime::format_duration(timeout),
                summary["rollout"]["message"].as_str().unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether the rollout command `verb` is done, judged from the placement's
/// status `summary`: pause once no wave starts; the others once the status
/// describes `revision` (the one rolling out; the previous after abort)
/// and the current spec, and Ready is True.
pub(super) fn rollout_done(summary: &serde_json::Value, verb: &str, revision: &str) -> bool {
    if verb == "pause" {
        return matches!(
            summary["rollout"]["phase"].as_str(),
            Some("Paused" | "Complete" | "Promoted" | "Aborted")
        );
    }
    summary["revision"] == revision && watch::verdict(summary) == Verdict::Ready
}
