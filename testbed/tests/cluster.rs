//! A simulated cluster through its own API, with the real `kubectl`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use relaymesh_testbed::cluster::{SimulatedCluster, SimulatorOptions};

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write as _;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(stdin.unwrap_or_default().as_bytes())
            .expect("stdin");
    }
    let output = child.wait_with_output().expect("kubectl finishes");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken, namespace: shop}
spec:
  selector: {matchLabels: {app: broken}}
  template:
    metadata: {labels: {app: broken}}
    spec: {containers: [{name: web, image: "example/fail:1"}]}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_simulated_status() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let options = SimulatorOptions {
        delay: Duration::from_millis(300),
        ..SimulatorOptions::default()
    };
    let cluster = SimulatedCluster::start("edge-1", dir.path(), options)
        .await
        .expect("starts");
    let kubeconfig = cluster.kubeconfig().to_path_buf();
    assert!(kubeconfig.starts_with(dir.path()));

    let answer = tokio::task::spawn_blocking(move || {
        let (ok, namespaces) = kubectl(&kubeconfig, &["get", "ns"], None);
        assert!(ok, "{namespaces}");
        for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            assert!(namespaces.contains(namespace), "{namespaces}");
        }
        let (ok, applied) = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(MANIFESTS));
        assert!(ok, "{applied}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, web) = kubectl(
                &kubeconfig,
                &[
                    "get",
                    "deploy",
                    "-n",
                    "shop",
                    "-o",
                    "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Available\")].status} {end}",
                ],
                None,
            );
            if web.contains("web=True") && web.contains("broken=False") {
                return web;
            }
            assert!(Instant::now() < deadline, "never settled: {web}");
            std::thread::sleep(Duration::from_millis(200));
        }
    })
    .await
    .expect("the kubectl thread");
    assert!(answer.contains("web=True"), "{answer}");
    cluster.shutdown().await.expect("stops cleanly");
}
