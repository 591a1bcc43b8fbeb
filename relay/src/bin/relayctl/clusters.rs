//! `relayctl cordon|uncordon|drain` and `relayctl label|annotate
//! cluster`: what the root sets on a cluster.

use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_root::client::{settle, Client};

use super::{structured, waits, Format};

/// `relayctl cordon|uncordon CLUSTER`: sets its cordon `state`.
pub(super) async fn cordon(client: &Client, cluster: &str, state: &str) -> anyhow::Result<()> {
    let (verb, done) = match state {
        "Schedulable" => ("uncordon", "uncordoned"),
        _ => ("cordon", "cordoned"),
    };
    client
        .cordon(cluster, state)
        .await
        .with_context(|| format!("cannot {verb} {cluster:?}"))?;
    println!("cluster/{cluster} {done}");
    Ok(())
}

/// `relayctl drain CLUSTER [--wait [--timeout T]]`.
pub(super) async fn drain(
    client: &Client,
    cluster: &str,
    wait: bool,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    let before = waits::heard_if(client, wait).await?;
    client
        .cordon(cluster, "Draining")
        .await
        .with_context(|| format!("cannot drain {cluster:?}"))?;
    if let Some(before) = before {
        waits::wait_drained(client, cluster, timeout).await?;
        waits::wait_statuses(
            client,
            &before,
            settle::Selection::MayShrink,
            deadline,
            &format!("the drain of {cluster:?}"),
        )
        .await?;
        println!("cluster/{cluster} drained");
    } else {
        println!("cluster/{cluster} draining");
    }
    Ok(())
}

/// What `relayctl label|annotate` can change.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum LabelKind {
    /// A cluster (its edge agent's node).
    Cluster,
}

/// The arguments of `relayctl label` and `relayctl annotate`.
#[derive(Debug, clap::Args)]
pub(super) struct ClusterChange {
    /// What to change: cluster.
    #[arg(value_enum)]
    kind: LabelKind,
    /// The cluster's name.
    name: String,
    /// KEY=VALUE to set, KEY- to remove.
    #[arg(required = true, value_name = "KEY=VALUE|KEY-")]
    changes: Vec<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// What `relayctl label|annotate cluster` changes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Metadata {
    Labels,
    Annotations,
}

/// `relayctl label|annotate cluster NAME KEY=VALUE… KEY-…`.
pub(super) async fn change(
    client: &Client,
    change: &ClusterChange,
    what: Metadata,
) -> anyhow::Result<()> {
    let ClusterChange {
        kind: LabelKind::Cluster,
        name,
        changes,
        output,
    } = change;
    let output = *output;
    let (set, remove) = label_changes(changes)?;
    let (field, verb, done) = match what {
        Metadata::Labels => ("set", "label", "labeled"),
        Metadata::Annotations => ("annotations", "annotate", "annotated"),
    };
    let changed = client
        .change_cluster(name, field, &set, &remove)
        .await
        .with_context(|| format!("cannot {verb} cluster {name:?}"))?;
    match output {
        Format::Json | Format::Yaml => {
            print!("{}", structured(output, &changed)?.unwrap_or_default())
        }
        Format::Text => println!("cluster/{name} {done}"),
    }
    Ok(())
}

pub(super) fn label_changes(
    changes: &[String],
) -> anyhow::Result<(std::collections::BTreeMap<String, String>, Vec<String>)> {
    let mut set = std::collections::BTreeMap::new();
    let mut remove = Vec::new();
    for change in changes {
        if let Some((key, value)) = change.split_once('=') {
            set.insert(key.to_string(), value.to_string());
        } else if let Some(key) = change.strip_suffix('-') {
            remove.push(key.to_string());
        } else {
            bail!("{change:?}: give KEY=VALUE to set one or KEY- to remove one");
        }
    }
    Ok((set, remove))
}
