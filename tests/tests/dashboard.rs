//! The live dashboard (`/dashboard/` on the root's API, docs/dashboard.md),
//! in headless Chromium: a viewer opens it through `kubectl proxy`, the
//! page shows the fleet's relays, clusters, placements and failing
//! clusters, and when a placement changes its counts change in the page
//! already loaded, through the API's watches, with no reload.
//!
//! `RELAYMESH_DASHBOARD_SCREENSHOT=PATH` writes a PNG of the page at the
//! end (how docs/dashboard.png is made).

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_tests::chromium::Browser;
use relaymesh_tests::{app_workload, connected_under, observe, wait_for, Mesh};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(60);

/// `kubectl proxy` on a free port as the user of `kubeconfig`; stopped
/// when dropped.
struct Proxy {
    child: Child,
    url: String,
}

impl Proxy {
    fn start(kubeconfig: &std::path::Path) -> anyhow::Result<Self> {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["proxy", "--port=0", "--address=127.0.0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("kubectl proxy")?;
        let stdout = child.stdout.take().context("kubectl proxy's stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        // "Starting to serve on 127.0.0.1:PORT"
        let Some(address) = line.trim().rsplit(' ').next().filter(|a| a.contains(':')) else {
            let _ = child.kill();
            bail!("kubectl proxy said {line:?}");
        };
        Ok(Self {
            url: format!("http://{address}"),
            child,
        })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the page shows, read from its DOM.
fn shown(browser: &mut Browser) -> anyhow::Result<Value> {
    let seen = browser.evaluate(
        r##"(() => {
            const rows = (table) => [...document.querySelectorAll(table + " tbody tr")];
            const cell = (row, name) => { const c = row.querySelector("td." + name); return c ? c.textContent : null; };
            return {
                connection: document.getElementById("connection")?.textContent,
                marker: window.relaymeshMarker || null,
                tree: [...document.querySelectorAll("#tree li")].map((li) => li.dataset.name),
                clusters: rows("#clusters").map((row) => ({
                    name: row.dataset.name, cordoned: cell(row, "cordoned"), labels: cell(row, "labels") })),
                placements: Object.fromEntries(rows("#placements").map((row) => [row.dataset.name, {
                    selected: Number(cell(row, "selected")), ready: Number(cell(row, "ready")),
                    failed: Number(cell(row, "failed")) }])),
                failing: rows("#failing").map((row) => row.dataset.name),
            };
        })()"##,
    )?;
    observe(&seen);
    Ok(seen)
}

#[test]
fn a_viewer_watches_the_fleet_change_in_the_dashboard() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let (mesh, _root) = Mesh::init()?;
    let _site = mesh.add_relay_connected("site", "root", SETTLE)?;
    let mut clusters = Vec::new();
    let mut agents = Vec::new();
    for (name, labels) in [("edge-1", "region=eu"), ("edge-2", "region=us")] {
        let cluster = runtime.block_on(SimulatedCluster::start(
            name,
            &mesh.dir.path().join(format!("cluster-{name}")),
            SimulatorOptions::default(),
        ))?;
        agents.push(mesh.add_agent_for(name, "site", labels, cluster.kubeconfig())?);
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
    mesh.place_web("nginx:1.27", "{names: [edge-1]}", clusters[0].kubeconfig())?;
    // One that fails on edge-2 (the simulator fails images with "fail").
    mesh.apply(&app_workload(
        "shop",
        "api",
        "api:fail",
        1,
        "{names: [edge-2]}",
        "",
    ))?;
    mesh.relayctl_ok(&["cordon", "edge-2"])?;

    // A viewer, not an admin: the page reads with the viewer's rights.
    let viewer = mesh.user_kubeconfig("vera", "viewers")?;
    let proxy = Proxy::start(&viewer)?;
    let mut browser = Browser::launch()?;
    browser.navigate(&format!("{}/dashboard/", proxy.url))?;
    let first = wait_for("the fleet in the page", SETTLE, || {
        let seen = shown(&mut browser)?;
        let ready = seen["connection"] == "live"
            && seen["tree"] == serde_json::json!(["root", "site", "edge-1", "edge-2"])
            && seen["placements"]["shop/web"]["ready"] == 1
            && seen["placements"]["shop/api"]["failed"] == 1
            && seen["failing"] == serde_json::json!(["shop/api/edge-2"]);
        Ok(ready.then_some(seen))
    })?;
    let names: Vec<&str> = first["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|cluster| cluster["name"].as_str())
        .collect();
    assert_eq!(names, ["edge-1", "edge-2"], "{first}");
    assert_eq!(first["clusters"][1]["cordoned"], "cordoned", "{first}");
    assert!(
        first["clusters"][0]["labels"]
            .as_str()
            .is_some_and(|labels| labels.contains("region=eu")),
        "{first}"
    );

    // The page stays loaded (the marker survives only without a reload)
    // while the placement changes at the root.
    browser.evaluate("window.relaymeshMarker = 'loaded once'")?;
    mesh.place_web(
        "nginx:1.27",
        "{names: [edge-1, edge-2]}",
        clusters[1].kubeconfig(),
    )?;
    let after = wait_for("the new counts in the same page", SETTLE, || {
        let seen = shown(&mut browser)?;
        let web = &seen["placements"]["shop/web"];
        Ok((web["selected"] == 2 && web["ready"] == 2).then_some(seen))
    })?;
    assert_eq!(
        after["marker"], "loaded once",
        "the page was reloaded: {after}"
    );

    if let Some(path) = std::env::var_os("RELAYMESH_DASHBOARD_SCREENSHOT") {
        std::fs::write(&path, browser.screenshot()?)?;
    }
    drop(browser);
    drop(proxy);
    for mut agent in agents {
        agent.stop()?;
    }
    Ok(())
}
