//! `relayctl tree|explain|status|link` and `relayctl bundle push`: how
//! the fleet and its placements are doing, read at the root and asked
//! through the tree.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context as _};
use relaymesh_root::client::{resources, status, tree, Client};

use super::{structured, waits, Format};

/// `relayctl tree [--placement P -n NS]`.
pub(super) async fn tree(
    client: &Client,
    placement: Option<&str>,
    namespace: &str,
    output: Format,
) -> anyhow::Result<()> {
    let (relays, agents) = tokio::try_join!(client.relays(), client.agents())
        .context("cannot list the tree's nodes")?;
    let nodes: Vec<_> = relays.into_iter().chain(agents).collect();
    let Some(mut root) = tree::build_tree(&nodes) else {
        bail!("the root listed no relay without a parent");
    };
    if let Some(placement) = &placement {
        let object = waits::placement(client, namespace, placement).await?;
        let mut answers = BTreeMap::new();
        for relay in tree::relays(&root) {
            match client.subtree(&relay, namespace, placement).await {
                Ok(answer) => {
                    answers.insert(relay, answer);
                }
                // A relay out of reach leaves its children
                // without counts; the rest of the tree still shows.
                Err(error) => eprintln!("warning: {relay}: {error}"),
            }
        }
        tree::annotate(&mut root, &answers);
        tree::annotate_top(&mut root, &object);
    }
    let mut stdout = std::io::stdout().lock();
    if let Some(text) = structured(output, &root)? {
        write!(stdout, "{text}")?;
        return Ok(());
    }
    write!(stdout, "{}", tree::render_text(&root))?;
    let detached = tree::detached_trees(&nodes);
    if !detached.is_empty() {
        writeln!(
            stdout,
            "\ndetached (their parent is not known to the root yet):"
        )?;
        for subtree in &detached {
            write!(stdout, "{}", tree::render_text(subtree))?;
        }
    }
    Ok(())
}

/// `relayctl explain PLACEMENT`.
pub(super) async fn explain(
    client: &Client,
    namespace: &str,
    placement: &str,
    output: Format,
) -> anyhow::Result<()> {
    let explanation = client
        .explain(namespace, placement)
        .await
        .with_context(|| format!("cannot explain placement {namespace}/{placement}"))?;
    if let Some(text) = structured(output, &explanation)? {
        print!("{text}");
    } else {
        print!("{}", resources::render_explanation(&explanation));
    }
    Ok(())
}

/// `relayctl status [PLACEMENT] [--by LABEL]` (`namespace` `None`: all).
pub(super) async fn status(
    client: &Client,
    namespace: Option<&str>,
    placement: Option<&str>,
    by: Option<&str>,
    output: Format,
) -> anyhow::Result<()> {
    let placements = client
        .placements(namespace, placement)
        .await
        .context("cannot read placements")?;
    let summaries: Vec<_> = placements.iter().map(status::summary).collect();
    match (&by, output) {
        (Some(label), Format::Json | Format::Yaml) => {
            let mut grouped = Vec::new();
            for summary in &summaries {
                let rows = status::groups_by(summary, label)?;
                grouped.push(serde_json::json!({
                    "namespace": summary["namespace"],
                    "name": summary["name"],
                    "label": label,
                    "groups": rows,
                }));
            }
            let printed = match (&placement, grouped.as_slice()) {
                (Some(_), [one]) => one.clone(),
                _ => serde_json::Value::Array(grouped),
            };
            print!("{}", structured(output, &printed)?.unwrap_or_default());
        }
        (Some(label), _) => print!("{}", status::render_groups(&summaries, label)?),
        (None, Format::Json | Format::Yaml) => {
            let printed = match (&placement, summaries.as_slice()) {
                (Some(_), [one]) => one.clone(),
                _ => serde_json::Value::Array(summaries),
            };
            print!("{}", structured(output, &printed)?.unwrap_or_default());
        }
        (None, _) => print!("{}", status::render_text(&summaries)),
    }
    Ok(())
}

/// `relayctl link NODE`.
pub(super) async fn link(client: &Client, node: &str, output: Format) -> anyhow::Result<()> {
    let link = client
        .link(node)
        .await
        .with_context(|| format!("cannot read the link of {node}"))?;
    if let Some(text) = structured(output, &link)? {
        print!("{text}");
    } else {
        print!("{}", tree::render_link(&link));
    }
    Ok(())
}

/// `relayctl bundle push FILE --name NAME`.
pub(super) async fn push_bundle(client: &Client, file: &Path, name: &str) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let (id, size) = client
        .push_bundle(name, bytes)
        .await
        .with_context(|| format!("cannot push bundle {name:?}"))?;
    println!("bundle {name} {id} ({size} bytes)");
    Ok(())
}
