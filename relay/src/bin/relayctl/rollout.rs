//! `relayctl rollout status|history|pause|resume|promote|abort`: a
//! Placement's rollout (docs/api.md, "Rollouts").

use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Subcommand;
use relaymesh_root::client::rollout::{render_history, render_status};
use relaymesh_root::client::Client;

use super::{structured, waits, Format};

#[derive(Debug, Subcommand)]
pub(super) enum RolloutCommand {
    /// Where the rollout stands: phase and why, revisions, clusters by how
    /// they do with the newest (-o json: the Placement's status.rollout).
    Status(RolloutArgs),
    /// Start no new wave (sets spec.rollout.paused); clusters keep what they run.
    Pause(RolloutArgs),
    /// Let waves start again (clears spec.rollout.paused).
    Resume(RolloutArgs),
    /// Send the revision rolling out to every selected cluster now.
    Promote(RolloutArgs),
    /// Send every cluster back to the previous revision; the revision stays
    /// aborted until a newer one is applied.
    Abort(RolloutArgs),
    /// The last revisions rolled out, newest first, with how each ended.
    History(RolloutArgs),
}

#[derive(Debug, clap::Args)]
pub(super) struct RolloutArgs {
    /// The placement.
    placement: String,
    /// The placement's namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    output: Format,
    /// With pause: wait until no new wave starts. With resume and promote:
    /// until every selected cluster runs the revision, ready (the Ready
    /// condition, for that revision). With abort: until every cluster runs
    /// the previous revision again, ready. Exit non-zero after --timeout,
    /// or at once if every cluster runs the revision and some failed.
    #[arg(long)]
    wait: bool,
    /// How long --wait waits.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

/// Runs `relayctl rollout COMMAND`.
pub(super) async fn run(client: &Client, command: RolloutCommand) -> anyhow::Result<()> {
    let (args, verb) = match command {
        RolloutCommand::Status(args) => (args, "status"),
        RolloutCommand::History(args) => (args, "history"),
        RolloutCommand::Pause(args) => (args, "pause"),
        RolloutCommand::Resume(args) => (args, "resume"),
        RolloutCommand::Promote(args) => (args, "promote"),
        RolloutCommand::Abort(args) => (args, "abort"),
    };
    let (namespace, name) = (args.namespace.as_str(), args.placement.as_str());
    let steered = match verb {
        "pause" | "resume" => Some(client.pause_rollout(namespace, name, verb == "pause").await),
        "promote" | "abort" => Some(client.steer_rollout(namespace, name, verb == "abort").await),
        _ => None,
    };
    if let Some(result) = steered {
        let steered =
            result.with_context(|| format!("cannot {verb} the rollout of {namespace}/{name}"))?;
        if args.wait {
            let rollout = &steered["status"]["rollout"];
            let revision = match verb {
                "abort" => &rollout["previousRevision"],
                _ => &rollout["revision"],
            };
            let revision = revision.as_str().unwrap_or_default().to_string();
            waits::wait_rollout(client, namespace, name, verb, &revision, args.timeout).await?;
        }
        match args.output {
            Format::Text => println!("placement/{name}: rollout {verb} requested"),
            _ => {
                let placement = client.placements(Some(namespace), Some(name)).await?;
                let rollout = &placement[0]["status"]["rollout"];
                print!("{}", structured(args.output, rollout)?.unwrap_or_default());
            }
        }
        return Ok(());
    }
    let placement = waits::placement(client, namespace, name).await?;
    let rollout = &placement["status"]["rollout"];
    if rollout.is_null() {
        bail!("placement {namespace}/{name} has no rollout status: its spec.rollout.strategy is All or absent, or the root has not built it yet");
    }
    match (args.output, verb) {
        (Format::Text, "history") => print!("{}", render_history(&placement)),
        (Format::Text, _) => print!("{}", render_status(&placement)),
        (output, "history") => print!(
            "{}",
            structured(output, &rollout["history"])?.unwrap_or_default()
        ),
        (output, _) => print!("{}", structured(output, rollout)?.unwrap_or_default()),
    }
    Ok(())
}
