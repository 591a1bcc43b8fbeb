//! relaymesh's own kinds have schemas, as built-ins do: unmodified kubectl
//! against a real root explains them, refuses a misspelt field under its
//! default strict validation (naming the field), only warns or says
//! nothing when asked to, and warns of a Placement naming a cluster the
//! tree does not have.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{bail, Context as _};
use relaymesh_tests::{kubectl_cache_dir, observe, Mesh};

const KUBECTL: &str = "/usr/bin/kubectl";

/// How long the root may take to place and report.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(60);

/// A valid Placement; the tests misspell parts of it.
const PLACEMENT: &str = r#"
apiVersion: relaymesh.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: default}
spec:
  workloads: [{kind: Deployment, names: [web]}]
  clusters:
    labelSelector: {matchLabels: {region: eu}}
  maxClusters: 2
  rollout: {strategy: Progressive, maxConcurrency: 1}
"#;

struct Kubectl {
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    fn new(mesh: &Mesh) -> anyhow::Result<Self> {
        let dir = mesh.dir.path().join("manifests");
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            kubeconfig: mesh.kubeconfig(),
            dir,
        })
    }

    fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        let mut command = Command::new(KUBECTL);
        if let Ok(cache) = kubectl_cache_dir(&self.kubeconfig) {
            command.env("KUBECACHEDIR", cache);
        }
        let output = command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .current_dir(&self.dir)
            .output()?;
        observe(format!(
            "kubectl {args:?}: {}\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
        Ok(output)
    }

    /// Runs kubectl, which must succeed; returns stdout and stderr.
    fn ok(&self, args: &[&str]) -> anyhow::Result<(String, String)> {
        let output = self.run(args)?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            bail!("kubectl {args:?} failed: {stderr}");
        }
        Ok((String::from_utf8_lossy(&output.stdout).into_owned(), stderr))
    }

    /// Runs kubectl, which must fail; returns stderr.
    fn refused(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run(args)?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            bail!("kubectl {args:?} succeeded: {stderr}");
        }
        Ok(stderr)
    }

    /// Writes `text` as the manifest `name`; its path.
    fn write(&self, name: &str, text: &str) -> anyhow::Result<String> {
        let path = self.dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path.to_str().context("a UTF-8 path")?.to_string())
    }
}

#[test]
fn kubectl_explains_and_strictly_validates_own_kinds() -> anyhow::Result<()> {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return Ok(());
    }
    let (mesh, _root) = Mesh::init()?;
    let kubectl = Kubectl::new(&mesh)?;

    // `kubectl explain` finds the fields and their descriptions.
    let (clusters, _) = kubectl.ok(&["explain", "placement.spec.clusters"])?;
    for expected in [
        "labelSelector",
        "names",
        "<[]string>",
        "not counted against maxClusters",
    ] {
        assert!(
            clusters.contains(expected),
            "{expected:?} missing: {clusters}"
        );
    }
    let (rollout, _) = kubectl.ok(&["explain", "placement.spec.rollout"])?;
    for expected in [
        "maxConcurrency",
        "maxUnavailablePerGroup",
        "progressDeadline",
        "Progressive",
    ] {
        assert!(
            rollout.contains(expected),
            "{expected:?} missing: {rollout}"
        );
    }
    let (status, _) = kubectl.ok(&["explain", "placement.status.clusters", "--recursive"])?;
    for expected in ["updated", "unknown", "selected"] {
        assert!(status.contains(expected), "{expected:?} missing: {status}");
    }
    let (cluster, _) = kubectl.ok(&["explain", "cluster.status"])?;
    assert!(cluster.contains("relayPath"), "{cluster}");

    // Strict (kubectl's default): a misspelt field is refused, named by
    // its path, on create and on a change of an existing Placement.
    let misspelt = kubectl.write(
        "misspelt.yaml",
        &PLACEMENT.replace("maxClusters: 2", "maxCluster: 2"),
    )?;
    let refused = kubectl.refused(&["apply", "-f", &misspelt])?;
    assert!(
        refused.contains("strict decoding error: unknown field \"spec.maxCluster\""),
        "{refused}"
    );
    let selector = kubectl.write(
        "selector.yaml",
        &PLACEMENT.replace("labelSelector:", "labelSelectr:"),
    )?;
    let refused = kubectl.refused(&["create", "-f", &selector])?;
    assert!(
        refused.contains("unknown field \"spec.clusters.labelSelectr\""),
        "{refused}"
    );
    let deep = kubectl.write(
        "deep.yaml",
        &PLACEMENT.replace("maxConcurrency: 1", "maxConcurency: 1"),
    )?;
    let refused = kubectl.refused(&["apply", "-f", &deep])?;
    assert!(
        refused.contains("unknown field \"spec.rollout.maxConcurency\""),
        "{refused}"
    );
    let good = kubectl.write("good.yaml", PLACEMENT)?;
    let (created, _) = kubectl.ok(&["apply", "-f", &good])?;
    assert!(
        created.contains("placement.relaymesh.dev/web created"),
        "{created}"
    );
    let refused = kubectl.refused(&["apply", "-f", &misspelt])?;
    assert!(
        refused.contains("unknown field \"spec.maxCluster\""),
        "{refused}"
    );
    let (max, _) = kubectl.ok(&[
        "get",
        "placement",
        "web",
        "-o",
        "jsonpath={.spec.maxClusters}/{.spec.maxCluster}",
    ])?;
    assert_eq!(max, "2/", "the refused change left nothing");

    // Warn stores the object and says which field; Ignore says nothing.
    kubectl.ok(&["delete", "placement", "web"])?;
    let (_, warned) = kubectl.ok(&["apply", "--validate=warn", "-f", &misspelt])?;
    assert!(
        warned.contains("Warning: unknown field \"spec.maxCluster\""),
        "{warned}"
    );
    kubectl.ok(&["delete", "placement", "web"])?;
    // Stored under Warn, the misspelt selector leaves no target: the
    // refusal names the field it was meant to be.
    let refused = kubectl.refused(&["apply", "--validate=warn", "-f", &selector])?;
    assert!(
        refused.contains("Required value: a labelSelector or names")
            && refused.contains("unknown field \"spec.clusters.labelSelectr\""),
        "{refused}"
    );
    let (_, quiet) = kubectl.ok(&["apply", "--validate=false", "-f", &misspelt])?;
    assert!(!quiet.contains("unknown field"), "{quiet}");
    kubectl.ok(&["delete", "placement", "web"])?;

    // A cluster name the tree does not know: accepted, with a warning
    // naming it.
    let named = kubectl.write(
        "named.yaml",
        &PLACEMENT.replace(
            "labelSelector: {matchLabels: {region: eu}}",
            "names: [edge-9, edge-10]",
        ),
    )?;
    let (created, warned) = kubectl.ok(&["apply", "-f", &named])?;
    assert!(
        created.contains("placement.relaymesh.dev/web created"),
        "{created}"
    );
    assert!(
        warned.contains(
            "Warning: spec.clusters.names: no known cluster is named \"edge-9\", \"edge-10\""
        ),
        "{warned}"
    );
    // Its status names them too, once the root has placed it.
    relaymesh_tests::wait_for("the unknown names in the status", SETTLE, || {
        let placement = relaymesh_tests::kubectl_get(&mesh.kubeconfig(), &["placement", "web"])?;
        let unknown = placement.map(|p| p["status"]["clusters"]["unknown"].clone());
        observe(format!("{unknown:?}"));
        Ok((unknown == Some(serde_json::json!(["edge-9", "edge-10"]))).then_some(()))
    })?;
    Ok(())
}
