//! The official Kubernetes Python client (`kubernetes` from PyPI, in a
//! virtualenv this test makes once under the target directory) against a
//! real root: typed creates and replaces, a merge patch, the scale
//! subresource, a label list, a watch from a resourceVersion, a collection
//! delete, an access review and the dynamic client on relaymesh's kinds
//! (`tests/python/client_compat.py`). What the client reports is checked,
//! then checked again with kubectl.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use relaymesh_tests::{bin_dir, kubectl, run_ok, Mesh};
use serde_json::{json, Value};

/// The client release the test pins (a pip requirements file), so that a
/// new release on PyPI cannot change what the test sees.
const REQUIREMENTS: &str = "requirements.txt";

/// A virtualenv with the client: `RELAYMESH_PYTHON_CLIENT` (a virtualenv
/// directory scripts/test fills while the build runs) or one in the target
/// directory, made on first use and kept.
fn virtualenv() -> anyhow::Result<PathBuf> {
    let dir = match std::env::var_os("RELAYMESH_PYTHON_CLIENT") {
        Some(dir) => PathBuf::from(dir),
        None => bin_dir()?.join("python-client"),
    };
    let python = dir.join("bin").join("python");
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", "import kubernetes"])
            .output()
            .is_ok_and(|output| output.status.success());
    if !ready {
        let requirements = python_dir().join(REQUIREMENTS);
        run_ok(Command::new("python3").arg("-m").arg("venv").arg(&dir)).context(
            "cannot make a virtualenv: install python3 and python3-venv (scripts/test-deps does)",
        )?;
        run_ok(
            Command::new(dir.join("bin").join("pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(&requirements),
        )
        .with_context(|| format!("cannot install {} from PyPI", requirements.display()))?;
    }
    Ok(python)
}

/// `tests/python`: the script and the client's requirements.
fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

fn script() -> PathBuf {
    python_dir().join("client_compat.py")
}

#[test]
fn the_official_python_client_works_against_the_root() -> anyhow::Result<()> {
    let python = virtualenv()?;
    let (mesh, _root) = Mesh::init()?;
    mesh.wait_for_api()?;
    let output = Command::new(&python)
        .arg(script())
        .arg(mesh.kubeconfig())
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python client failed:\n{stderr}\n{stdout}\n{}",
        mesh.logs()
    );
    let facts: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .with_context(|| format!("the script's facts: {stdout}"))?;
    assert_eq!(
        facts["c"],
        json!({"owner": "python, replaced", "patched": "yes"})
    );
    assert_eq!(
        facts["scale"],
        json!({"replicas": 3, "selector": "app=web"})
    );
    assert_eq!(facts["listed"], json!(["a", "b"]));
    assert_eq!(facts["watched"], json!([["ADDED", "late"]]));
    assert_eq!(facts["left"], json!(["c", "late"]));
    assert_eq!(facts["allowed"], true);
    assert_eq!(facts["placements"], json!(["web"]));
    assert_eq!(facts["relays"], json!(["root"]));

    // What kubectl sees of it.
    let root = mesh.kubeconfig();
    let replicas = kubectl(
        &root,
        &[
            "get",
            "deploy",
            "web",
            "-n",
            "py",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
        None,
    )?;
    assert_eq!(String::from_utf8_lossy(&replicas.stdout), "3");
    let maps = kubectl(
        &root,
        &["get", "configmaps", "-n", "py", "-o", "name"],
        None,
    )?;
    assert_eq!(
        String::from_utf8_lossy(&maps.stdout)
            .lines()
            .collect::<Vec<_>>(),
        ["configmap/c", "configmap/late"]
    );
    Ok(())
}
