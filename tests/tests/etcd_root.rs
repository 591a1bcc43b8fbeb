//! A root whose objects live on a 3-member etcd cluster (`relay init
//! --store etcd`), driven with the real kubectl:
//!
//! * what `kubectl apply` stores is in etcd, under the root's prefix, and a
//!   placement made there reaches its cluster (the placement controller
//!   follows etcd's feed);
//! * a second `relay init` on the same prefix is refused before it writes;
//! * one etcd member killed changes nothing; two killed make the API answer
//!   503 with a message (never stale data), while the cluster below keeps
//!   what it runs; with the quorum back, the API answers again by itself;
//! * the root reaches etcd over TLS with a client certificate, and a
//!   stranger's certificate is refused at `relay init`;
//! * a watch from a version seen before the root restarted gets every
//!   later change, from etcd's history.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};
use relaymesh_testbed::etcd::{EtcdCluster, EtcdTls};
use relaymesh_tests::{
    binary, connected_under, free_tcp_port, free_udp_port, kubectl, kubectl_ok, wait_for,
    web_image, web_workload, Mesh,
};

const SETTLE: Duration = Duration::from_secs(90);

#[test]
fn a_root_on_etcd_serves_places_and_says_when_etcd_has_no_quorum() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let etcd_dir = tempfile::tempdir()?;
    let mut etcd = EtcdCluster::start(etcd_dir.path(), 3)?;
    let endpoints = etcd.endpoints().join(",");
    let (mesh, mut root) =
        Mesh::init_full(&["--store", "etcd", "--etcd-endpoints", &endpoints], &[])?;

    // A second root on the same prefix is refused, and writes nothing.
    let other = mesh.dir.path().join("other-root");
    let output = Command::new(binary("relay")?)
        .arg("init")
        .arg("--data-dir")
        .arg(&other)
        .args(["--listen", &format!("127.0.0.1:{}", free_udp_port()?)])
        .args(["--api-listen", &format!("127.0.0.1:{}", free_tcp_port()?)])
        .args(["--store", "etcd", "--etcd-endpoints", &endpoints])
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a second root took the prefix");
    assert!(stderr.contains("already holds keys"), "{stderr}");
    assert!(
        !other.exists(),
        "the refused init wrote {}",
        other.display()
    );

    let cluster = runtime.block_on(SimulatedCluster::start(
        "edge-1",
        &mesh.dir.path().join("cluster-edge-1"),
        SimulatorOptions::default(),
    ))?;
    let _agent = mesh.add_agent_for("edge-1", "root", "region=eu", cluster.kubeconfig())?;
    wait_for("edge-1 in the tree", SETTLE, || {
        Ok(connected_under(&mesh.tree()?, "edge-1", "root").then_some(()))
    })
    .with_context(|| mesh.logs())?;

    mesh.place_web("nginx:1.27", "{names: [edge-1]}", cluster.kubeconfig())?;
    // Stored in etcd, under the root's prefix: the objects, the token
    // edge-1 joined with, and the API's certificate, sealed.
    let connection = etcd.connect("/relaymesh/")?;
    let stored = connection.get_value(b"o/apps/deployments/shop/web")?;
    assert!(stored.is_some(), "the Deployment is not in etcd");
    let (tokens, _) = connection.range(b"s/tokens/", None)?;
    assert_eq!(tokens.len(), 1, "the issued token is not in etcd");
    let (sealed, _) = connection
        .get_value(b"s/api-certificate")?
        .context("the API certificate is not in etcd")?;
    assert!(
        relaymesh_protocol::codec::decode::<relaymesh_node::store::ApiCertificate>(&sealed)
            .is_err(),
        "the API certificate is in etcd in plaintext"
    );
    let key_file = mesh.data_dir("root").join("secrets.key");
    let mode = std::fs::metadata(&key_file)?.permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", key_file.display());

    // One member down: the API goes on.
    etcd.kill(2)?;
    mesh.place_web("nginx:1.28", "{names: [edge-1]}", cluster.kubeconfig())?;

    // Two down: 503 with a message, and the cluster keeps what it runs.
    etcd.kill(1)?;
    let output = kubectl(
        &mesh.kubeconfig(),
        &[
            "get",
            "deployment",
            "web",
            "-n",
            "shop",
            "--request-timeout",
            "30s",
        ],
        None,
    )?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a read without quorum succeeded");
    assert!(
        stderr.contains("storage unavailable") || stderr.contains("ServiceUnavailable"),
        "kubectl said: {stderr}"
    );
    assert_eq!(
        web_image(cluster.kubeconfig())?.as_deref(),
        Some("nginx:1.28"),
        "the cluster lost what it runs"
    );

    // Quorum back: the API answers again, with what was acknowledged.
    etcd.restart(1)?;
    etcd.restart(2)?;
    etcd.wait_healthy()?;
    let image = wait_for("the API back", SETTLE, || {
        let output = kubectl(
            &mesh.kubeconfig(),
            &[
                "get",
                "deployment",
                "web",
                "-n",
                "shop",
                "-o",
                "jsonpath={.spec.template.spec.containers[0].image}",
            ],
            None,
        )?;
        Ok(output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned()))
    })
    .with_context(|| mesh.logs())?;
    assert_eq!(image, "nginx:1.28");
    // And a change made now reaches the cluster. etcd 3.4 does not always
    // extend the leader's lease when its quorum returns after a long loss
    // (CI runs 105 and 106, a loaded machine): the root then steps down at
    // its next write and exits, as a deposed leader must, and its
    // supervisor (deploy/systemd: Restart=always) starts it again. That
    // exit, and no other, is restarted here.
    // etcd may still refuse a request or two while its members settle
    // (a 503 from the root, stress run of 2026-11-29): the apply is made
    // again until it is taken.
    let workload = web_workload("nginx:1.29", 1, "{names: [edge-1]}", "");
    wait_for("the new image applied at the root", SETTLE, || {
        mesh.apply(&workload).map(Some)
    })?;
    let mut restarted = false;
    wait_for("nginx:1.29 on the cluster", SETTLE, || {
        if !restarted && root.exit_status()?.is_some() {
            let log = std::fs::read_to_string(&root.log)?;
            anyhow::ensure!(
                log.contains("this replica is no longer the root's leader"),
                "the root exited, not for a lost lease"
            );
            root = mesh.start("root")?;
            restarted = true;
        }
        Ok((web_image(cluster.kubeconfig())?.as_deref() == Some("nginx:1.29")).then_some(()))
    })
    .with_context(|| mesh.logs())?;

    // A secrets key others may read: the root refuses to start, saying so.
    root.stop()?;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644))?;
    let output = Command::new(binary("relay")?)
        .arg("run")
        .arg("--data-dir")
        .arg(mesh.data_dir("root"))
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the root ran with a 0644 secrets key"
    );
    // The node's check of its data directory, or the key's own, names it.
    assert!(
        stderr.contains("secrets.key") && stderr.contains("0644"),
        "{stderr}"
    );
    Ok(())
}

/// PEM files: a CA, a serving certificate for 127.0.0.1 and a client
/// certificate it signed, written under `dir` with `prefix`.
fn certificates(dir: &std::path::Path, prefix: &str) -> anyhow::Result<EtcdTls> {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate()?;
    let server = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?
        .signed_by(&server_key, &issuer)?;
    let client_key = KeyPair::generate()?;
    let client =
        CertificateParams::new(vec!["root".to_string()])?.signed_by(&client_key, &issuer)?;
    let write = |name: &str, pem: String| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.join(format!("{prefix}-{name}.pem"));
        std::fs::write(&path, pem)?;
        Ok(path)
    };
    Ok(EtcdTls {
        ca: write("ca", ca.pem())?,
        server_cert: write("server", server.pem())?,
        server_key: write("server-key", server_key.serialize_pem())?,
        client_cert: write("client", client.pem())?,
        client_key: write("client-key", client_key.serialize_pem())?,
    })
}

#[test]
fn a_root_reaches_etcd_over_tls_with_a_client_certificate_and_refuses_a_wrong_one(
) -> anyhow::Result<()> {
    let etcd_dir = tempfile::tempdir()?;
    let tls = certificates(etcd_dir.path(), "etcd")?;
    let etcd = EtcdCluster::start_tls(&etcd_dir.path().join("data"), 1, tls.clone())?;
    let endpoints = etcd.endpoints().join(",");
    let with = |ca: &std::path::Path, cert: &std::path::Path, key: &std::path::Path| {
        vec![
            "--store".to_string(),
            "etcd".to_string(),
            "--etcd-endpoints".to_string(),
            endpoints.clone(),
            "--etcd-ca".to_string(),
            ca.display().to_string(),
            "--etcd-cert".to_string(),
            cert.display().to_string(),
            "--etcd-key".to_string(),
            key.display().to_string(),
        ]
    };

    // A client certificate from another CA: refused, saying etcd is out of
    // reach, and nothing written.
    let stranger = certificates(etcd_dir.path(), "stranger")?;
    let refused_dir = etcd_dir.path().join("refused-root");
    let output = Command::new(binary("relay")?)
        .arg("init")
        .arg("--data-dir")
        .arg(&refused_dir)
        .args(["--listen", &format!("127.0.0.1:{}", free_udp_port()?)])
        .args(["--api-listen", &format!("127.0.0.1:{}", free_tcp_port()?)])
        .args(with(&tls.ca, &stranger.client_cert, &stranger.client_key))
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "a stranger's certificate was accepted"
    );
    assert!(stderr.contains("etcd"), "{stderr}");
    assert!(
        !refused_dir.exists(),
        "the refused init wrote {}",
        refused_dir.display()
    );

    // The right one: the root serves and its objects are in etcd.
    let args = with(&tls.ca, &tls.client_cert, &tls.client_key);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (mesh, _root) = Mesh::init_full(&args, &[])?;
    let output = kubectl(
        &mesh.kubeconfig(),
        &["create", "configmap", "over-tls", "--from-literal=a=b"],
        None,
    )?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stored = etcd
        .connect("/relaymesh/")?
        .get_value(b"o//configmaps/default/over-tls")?;
    assert!(stored.is_some(), "the ConfigMap is not in etcd");
    Ok(())
}

#[test]
fn a_watch_resumes_across_a_root_restart_from_the_version_it_saw() -> anyhow::Result<()> {
    let etcd_dir = tempfile::tempdir()?;
    let etcd = EtcdCluster::start(etcd_dir.path(), 1)?;
    let endpoints = etcd.endpoints().join(",");
    let (mesh, mut root) =
        Mesh::init_full(&["--store", "etcd", "--etcd-endpoints", &endpoints], &[])?;
    kubectl_ok(
        &mesh.kubeconfig(),
        &["create", "configmap", "one", "--from-literal=a=1"],
        None,
    )?;
    let seen = kubectl_ok(
        &mesh.kubeconfig(),
        &[
            "get",
            "configmap",
            "one",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
        None,
    )?;
    kubectl_ok(
        &mesh.kubeconfig(),
        &["create", "configmap", "two", "--from-literal=a=2"],
        None,
    )?;
    kubectl_ok(&mesh.kubeconfig(), &["delete", "configmap", "one"], None)?;

    // A new process: its own history starts empty, etcd's does not.
    root.stop()?;
    let _root = mesh.start("root")?;
    mesh.wait_for_api()?;
    let path = format!(
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={seen}&timeoutSeconds=2"
    );
    let stream = kubectl_ok(&mesh.kubeconfig(), &["get", "--raw", &path], None)?;
    let events: Vec<(String, String)> = stream
        .lines()
        .map(serde_json::from_str::<serde_json::Value>)
        .collect::<Result<Vec<_>, _>>()?
        .iter()
        .map(|event| {
            (
                event["type"].as_str().unwrap_or_default().to_string(),
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        events,
        vec![
            ("ADDED".to_string(), "two".to_string()),
            ("DELETED".to_string(), "one".to_string()),
        ],
        "the changes after {seen}, none missed: {stream}"
    );
    Ok(())
}
