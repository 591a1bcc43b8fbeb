//! Moving a root's objects, with the fleet running below it:
//!
//! * `relay migrate-store --to etcd` moves a stopped sled root onto etcd;
//! * a root on etcd whose disk is lost too is restored from `etcdctl
//!   snapshot save` into a new etcd cluster (`etcdctl snapshot restore`)
//!   and a new replica (`relay init --join-root` with the kept secrets
//!   key) at the old address.
//!
//! Either way the root serves what it had, no cluster is asked to change
//! anything (its audit log gains no line about the placed workload), and a
//! change made afterwards reaches the cluster.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_testbed::etcd::EtcdCluster;
use relaymesh_tests::{
    app_workload, audited, binary, connected_under, free_udp_port, kubectl_get, run_ok, wait_for,
    Mesh, RelayProcess,
};

const SETTLE: Duration = Duration::from_secs(90);

/// Cluster edge-1 joined under the root and running `shop/web`: the
/// cluster and its agent.
fn placed(
    mesh: &Mesh,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<(SimulatedCluster, RelayProcess)> {
    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let agent = mesh.add_agent_for("edge-1", "root", "region=eu", cluster.kubeconfig())?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;
    mesh.place_web("nginx:1.27", "{names: [edge-1]}", cluster.kubeconfig())?;
    Ok((cluster, agent))
}

/// After the root came back: it serves `shop/web`, a new placement reaches
/// edge-1, and by then the cluster was asked nothing about `shop` since
/// `before` audit lines.
fn nothing_reapplied(mesh: &Mesh, cluster: &SimulatedCluster, before: usize) -> anyhow::Result<()> {
    mesh.wait_for_api().with_context(|| mesh.logs())?;
    let web = kubectl_get(&mesh.kubeconfig(), &["deployment", "web", "-n", "shop"])?
        .context("the root lost deployment shop/web")?;
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    // A later change on the same link: once it has arrived, anything the
    // move would have re-sent has too.
    mesh.apply(&app_workload(
        "tools",
        "api",
        "busybox:1.36",
        1,
        "{names: [edge-1]}",
        "",
    ))?;
    wait_for("tools/api on edge-1", SETTLE, || {
        kubectl_get(cluster.kubeconfig(), &["deployment", "api", "-n", "tools"])
    })
    .with_context(|| mesh.logs())?;
    let audit = audited(cluster.audit_log())?;
    assert!(
        audit[..before.min(audit.len())]
            .iter()
            .any(|line| line.to_string().contains("shop")),
        "the first apply of shop/web is not in the cluster's audit log: {audit:?}"
    );
    let about_shop: Vec<_> = audit[before.min(audit.len())..]
        .iter()
        .filter(|line| line.to_string().contains("shop"))
        .collect();
    assert!(
        about_shop.is_empty(),
        "the cluster was asked to change shop/web again: {about_shop:?}"
    );
    Ok(())
}

#[test]
fn migrate_store_moves_a_sled_root_onto_etcd_without_reapplying() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let etcd_dir = tempfile::tempdir()?;
    let etcd = EtcdCluster::start(etcd_dir.path(), 1)?;
    let endpoints = etcd.endpoints().join(",");
    let (mesh, mut root) = Mesh::init()?;
    let (cluster, _agent) = placed(&mesh, &runtime)?;
    let before = audited(cluster.audit_log())?.len();

    root.stop()?;
    let output = Command::new(binary("relay")?)
        .arg("migrate-store")
        .arg("--data-dir")
        .arg(mesh.data_dir("root"))
        .args(["--to", "etcd", "--etcd-endpoints", &endpoints])
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("migrate-store: {}", String::from_utf8_lossy(&output.stderr));
    }
    assert!(stdout.contains("moved"), "{stdout}");
    // Once is enough: a second run says the root is on etcd already.
    let again = Command::new(binary("relay")?)
        .arg("migrate-store")
        .arg("--data-dir")
        .arg(mesh.data_dir("root"))
        .args(["--to", "etcd", "--etcd-endpoints", &endpoints])
        .output()?;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("on etcd already"));
    let connection = etcd.connect("/relaymesh/")?;
    assert!(
        connection
            .get_value(b"o/apps/deployments/shop/web")?
            .is_some(),
        "the Deployment is not in etcd"
    );
    // The root's own state went with them: the token edge-1 joined with,
    // and the API's certificate (the root serves with it below).
    let (tokens, _) = connection.range(b"s/tokens/", None)?;
    assert_eq!(tokens.len(), 1, "the issued token was not moved");
    assert!(connection.get_value(b"s/api-certificate")?.is_some());

    let _root = mesh.start("root")?;
    nothing_reapplied(&mesh, &cluster, before)
}

#[test]
fn a_root_on_etcd_comes_back_from_a_snapshot_in_a_new_cluster() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let etcd_dir = tempfile::tempdir()?;
    let old = EtcdCluster::start(&etcd_dir.path().join("old"), 1)?;
    let listen = format!("127.0.0.1:{}", free_udp_port()?);
    let (mesh, mut root) = Mesh::init_full_listening(
        &[
            "--store",
            "etcd",
            "--etcd-endpoints",
            &old.endpoints().join(","),
        ],
        &[],
        &listen,
    )?;
    let (cluster, _agent) = placed(&mesh, &runtime)?;
    let before = audited(cluster.audit_log())?.len();

    let snapshot = etcd_dir.path().join("snapshot.db");
    old.snapshot(&snapshot)?;
    root.stop()?;
    drop(old);
    // The root's disk is lost too: what the operator kept is the snapshot,
    // the secrets key and the admin kubeconfig.
    let kept = tempfile::tempdir()?;
    let key = kept.path().join("secrets.key");
    std::fs::copy(mesh.data_dir("root").join("secrets.key"), &key)?;
    let kubeconfig = std::fs::read(mesh.kubeconfig())?;
    std::fs::remove_dir_all(mesh.data_dir("root"))?;

    let new = EtcdCluster::restore(&etcd_dir.path().join("new"), &snapshot, 3)?;
    run_ok(
        Command::new(binary("relay")?)
            .args(["init", "--join-root", "--secrets-key"])
            .arg(&key)
            .arg("--data-dir")
            .arg(mesh.data_dir("root"))
            .args(["--listen", &listen])
            .args(["--api-listen", &format!("127.0.0.1:{}", mesh.api_port)])
            .args(["--store", "etcd", "--etcd-endpoints"])
            .arg(new.endpoints().join(",")),
    )?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(mesh.kubeconfig())?
        .write_all(&kubeconfig)?;
    let _root = mesh.start("root")?;
    nothing_reapplied(&mesh, &cluster, before)
}
