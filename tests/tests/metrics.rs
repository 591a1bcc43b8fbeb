//! The metrics endpoint (`--metrics-listen`, docs/metrics.md), scraped from
//! a root, a relay and an edge agent during a fanout to two simulated
//! clusters: `promtool check metrics` is clean on each, the root's phase
//! counts match the Placement's status, every documented metric is served,
//! and the rules file and the Grafana dashboard name only served metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::{
    connected_under, free_tcp_port, kubectl, observe, scrape_metrics, wait_for, Mesh,
};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(90);

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
---
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  workloads: [{labelSelector: {matchLabels: {app: web}}}]
  clusters: {names: [edge-1, edge-2]}
"#;

/// The phases `relaymesh_placement_clusters` counts.
const PHASES: [&str; 5] = ["pending", "applied", "ready", "failed", "offline"];

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// `GET /metrics` at `address`: the body of a 200 answer.
fn scrape(address: &str) -> anyhow::Result<String> {
    scrape_metrics(address)?.with_context(|| format!("nothing listens on {address}"))
}

/// `promtool check metrics` on `text`: its complaints, empty when clean.
fn promtool_check(text: &str) -> anyhow::Result<String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("promtool (Debian's prometheus; scripts/test-deps installs it)")?;
    child
        .stdin
        .take()
        .context("promtool's stdin")?
        .write_all(text.as_bytes())?;
    let output = child.wait_with_output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() && said.trim().is_empty() {
        bail!("promtool failed without a word: {}", output.status);
    }
    Ok(said)
}

/// One sample: its metric name, labels and value.
type Sample = (String, BTreeMap<String, String>, f64);

/// The samples of a text-format exposition (label values hold no `,` or
/// `"` in what relaymesh serves here).
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let value: f64 = value.parse().ok()?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter_map(|pair| {
                    let (key, value) = pair.split_once('=')?;
                    Some((key.to_string(), value.trim_matches('"').to_string()))
                })
                .collect();
            Some((name.to_string(), labels, value))
        })
        .collect()
}

/// The families a scrape declares (`# TYPE name kind`).
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(sample, have, _)| {
            sample == name
                && labels
                    .iter()
                    .all(|(key, value)| have.get(*key).map(String::as_str) == Some(*value))
        })
        .map(|(_, _, value)| *value)
}

/// The metric names docs/metrics.md lists in its tables.
fn documented() -> anyhow::Result<BTreeSet<String>> {
    let page = std::fs::read_to_string(repo_file("docs/metrics.md"))?;
    let names: BTreeSet<String> = page
        .lines()
        .filter_map(|line| line.strip_prefix("| `relaymesh_"))
        .filter_map(|rest| rest.split('`').next())
        .map(|name| format!("relaymesh_{name}"))
        .collect();
    ensure!(names.len() >= 20, "docs/metrics.md lists only {names:?}");
    Ok(names)
}

/// Every `relaymesh_…` name in a query, a histogram's series named by
/// their family. Recording rules' names (`relaymesh:…`) are not metrics.
fn named_metrics(query: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = query;
    while let Some(start) = rest.find("relaymesh_") {
        let boundary = start == 0 || {
            let before = rest.as_bytes()[start - 1];
            !(before.is_ascii_alphanumeric() || before == b'_' || before == b':')
        };
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if boundary {
            let name = &tail[..end];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name);
            names.insert(family.to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// Every query of the Grafana dashboard: panel targets and variables.
fn dashboard_queries() -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(repo_file("deploy/grafana/relaymesh-dashboard.json"))?;
    let dashboard: Value = serde_json::from_str(&text).context("the dashboard is not JSON")?;
    let mut queries: Vec<String> = dashboard["panels"]
        .as_array()
        .context("no panels")?
        .iter()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .map(|target| target["expr"].as_str().map(str::to_string))
        .collect::<Option<_>>()
        .context("a target without an expr")?;
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(query) = variable["query"]["query"].as_str() {
            queries.push(query.to_string());
        }
    }
    ensure!(queries.len() >= 10, "only {} queries", queries.len());
    Ok(queries)
}

#[test]
fn the_rules_file_passes_promtool() -> anyhow::Result<()> {
    let rules = repo_file("deploy/prometheus/relaymesh-rules.yaml");
    let output = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .context("promtool (Debian's prometheus; scripts/test-deps installs it)")?;
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("SUCCESS"), "{said}");
    // Every alert the rules raise has a runbook: a heading of
    // docs/metrics.md.
    let page = std::fs::read_to_string(repo_file("docs/metrics.md"))?;
    let headings: BTreeSet<String> = page
        .lines()
        .filter_map(|line| line.strip_prefix("### "))
        .map(str::to_lowercase)
        .collect();
    let text = std::fs::read_to_string(&rules)?;
    let alerts = text.matches("- alert: ").count();
    let runbooks: Vec<&str> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("runbook: docs/metrics.md#"))
        .collect();
    assert!(alerts >= 6, "{alerts} alerts");
    assert_eq!(runbooks.len(), alerts, "an alert without a runbook");
    for runbook in runbooks {
        assert!(headings.contains(runbook), "no heading for {runbook}");
    }
    Ok(())
}

#[test]
fn a_fanout_is_seen_in_the_metrics_of_the_root_a_relay_and_an_agent() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let root_metrics = format!("127.0.0.1:{}", free_tcp_port()?);
    let site_metrics = format!("127.0.0.1:{}", free_tcp_port()?);
    let agent_metrics = format!("127.0.0.1:{}", free_tcp_port()?);
    let (mesh, _root) = Mesh::init_with(&["--metrics-listen", &root_metrics])?;
    let _site = mesh.add_relay_with("site", "root", &["--metrics-listen", &site_metrics])?;
    wait_for("site in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "site", "root").then_some(()))
    })?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for (name, extra) in [("edge-1", Some(&agent_metrics)), ("edge-2", None)] {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        let args: Vec<&str> = extra
            .map(|address| vec!["--metrics-listen", address.as_str()])
            .unwrap_or_default();
        agents.push(mesh.add_agent_for_with(
            name,
            "site",
            "region=eu",
            cluster.kubeconfig(),
            &args,
        )?);
        clusters.push(cluster);
    }
    wait_for("both agents in the tree", SETTLE, || {
        let tree = mesh.tree()?;
        Ok(
            (connected_under(&tree, "edge-1", "site") && connected_under(&tree, "edge-2", "site"))
                .then_some(()),
        )
    })
    .with_context(|| mesh.logs())?;

    let applied = kubectl(&mesh.kubeconfig(), &["apply", "-f", "-"], Some(MANIFESTS))?;
    ensure!(
        applied.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&applied.stderr)
    );
    wait_for("web ready on both clusters", SETTLE, || {
        let status = mesh.placement_status("web", "shop")?;
        observe(&status);
        Ok((status["ready"] == 2).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // The root's counts are the Placement's status, phase by phase (read
    // until both are taken between two changes).
    wait_for(
        "the root's phase counts to match the status",
        SETTLE,
        || {
            let status = mesh.placement_status("web", "shop")?;
            let served = samples(&scrape(&root_metrics)?);
            let labels = |phase| {
                [
                    ("namespace", "shop"),
                    ("placement", "web"),
                    ("phase", phase),
                ]
            };
            let same = PHASES.iter().all(|phase| {
                let counted = value(&served, "relaymesh_placement_clusters", &labels(phase));
                counted == status[phase].as_f64()
            });
            let selected = value(
                &served,
                "relaymesh_placement_selected_clusters",
                &[("namespace", "shop"), ("placement", "web")],
            );
            Ok((same && selected == status["selected"].as_f64()).then_some(()))
        },
    )?;

    // Facts of the fanout, as each node counts them.
    let facts = wait_for("each node to count the fanout", SETTLE, || {
        let root = scrape(&root_metrics)?;
        let site = scrape(&site_metrics)?;
        let agent = scrape(&agent_metrics)?;
        let (r, s, a) = (samples(&root), samples(&site), samples(&agent));
        let child = |peer| [("peer", peer), ("direction", "child")];
        let facts = [
            (
                "root counted 2 applies",
                value(&r, "relaymesh_placement_applied_seconds_count", &[]) >= Some(2.0),
            ),
            (
                "root's link to site up",
                value(&r, "relaymesh_link_up", &child("site")) == Some(1.0),
            ),
            (
                "site's link to edge-1 up",
                value(&s, "relaymesh_link_up", &child("edge-1")) == Some(1.0),
            ),
            (
                "site's link to edge-2 up",
                value(&s, "relaymesh_link_up", &child("edge-2")) == Some(1.0),
            ),
            (
                "site's link to root up",
                value(
                    &s,
                    "relaymesh_link_up",
                    &[("peer", "root"), ("direction", "parent")],
                ) == Some(1.0),
            ),
            (
                "site served edge-1 a bundle",
                value(&s, "relaymesh_bundles_served_total", &[("peer", "edge-1")]) >= Some(1.0),
            ),
            (
                "site stores a bundle",
                value(&s, "relaymesh_bundles_stored", &[]) >= Some(1.0),
            ),
            (
                "edge-1 stores a bundle",
                value(&a, "relaymesh_bundles_stored", &[]) >= Some(1.0),
            ),
            (
                "edge-1 holds an entry",
                value(&a, "relaymesh_slice_entries", &[]) >= Some(1.0),
            ),
            (
                "edge-1 applied",
                value(&a, "relaymesh_agent_applies_total", &[]) >= Some(1.0),
            ),
            (
                "edge-1 timed an apply",
                value(&a, "relaymesh_agent_apply_seconds_count", &[]) >= Some(1.0),
            ),
            (
                "edge-1 sent status up",
                value(&a, "relaymesh_status_delay_seconds_count", &[]) >= Some(1.0),
            ),
            (
                "edge-1's certificate expires later",
                value(
                    &a,
                    "relaymesh_certificate_expiry_timestamp_seconds",
                    &[("certificate", "node")],
                )
                .is_some_and(|expiry| expiry > 1.7e9),
            ),
        ];
        let wrong: Vec<&str> = facts
            .iter()
            .filter(|(_, holds)| !holds)
            .map(|(fact, _)| *fact)
            .collect();
        observe(format_args!("not yet: {wrong:?}"));
        let counted = wrong.is_empty();
        Ok(counted.then_some([root, site, agent]))
    })?;

    // promtool finds nothing to say of any of them.
    for (node, text) in ["root", "site", "edge-1"].iter().zip(&facts) {
        let said = promtool_check(text)?;
        assert!(
            said.trim().is_empty(),
            "promtool check metrics on {node}: {said}"
        );
    }

    // Every documented metric is served, by the node it is documented for.
    let served: BTreeSet<String> = facts.iter().flat_map(|text| families(text)).collect();
    let documented = documented()?;
    let missing: Vec<_> = documented.difference(&served).collect();
    // Refusals have a series only once a limit refused.
    let missing: Vec<_> = missing
        .into_iter()
        .filter(|name| name.as_str() != "relaymesh_limit_refusals_total")
        .collect();
    assert!(missing.is_empty(), "documented, not served: {missing:?}");
    let undocumented: Vec<_> = served.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "served, not documented: {undocumented:?}"
    );

    // The dashboard and the rules query only what is served.
    let rules = std::fs::read_to_string(repo_file("deploy/prometheus/relaymesh-rules.yaml"))?;
    for query in dashboard_queries()?
        .iter()
        .map(String::as_str)
        .chain([rules.as_str()])
    {
        let names = named_metrics(query);
        assert!(
            !names.is_empty(),
            "a query names no relaymesh metric: {query}"
        );
        for name in names {
            assert!(
                documented.contains(&name) && (served.contains(&name) || name.contains("refusals")),
                "{query} names {name}, which no node serves"
            );
        }
    }
    drop(agents);
    Ok(())
}

#[test]
fn queries_name_their_metrics() {
    let names = named_metrics(
        "histogram_quantile(0.99, rate(relaymesh_store_flush_seconds_bucket[5m])) + relaymesh:x_total + relaymesh_link_up",
    );
    let expected: BTreeSet<String> = ["relaymesh_store_flush_seconds", "relaymesh_link_up"]
        .into_iter()
        .map(str::to_string)
        .collect();
    assert_eq!(names, expected);
}
