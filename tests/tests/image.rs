//! The container image (`deploy/Containerfile`, `scripts/build-image`):
//! built here with Debian's podman from the binaries under test, FROM
//! scratch (no registry), it runs `relay --version` and `edge-agent
//! --version`, as user 65532: writing to `/` is refused to it and allowed
//! to root in the same image.
//!
//! podman runs with the `vfs` storage driver and `runc` with lowered
//! rlimits, which is what works inside this test machine's container; a
//! normal host needs none of it.

use std::path::PathBuf;
use std::process::{Command, Output};

use anyhow::{ensure, Context as _};
use relaymesh_tests::bin_dir;

const PODMAN_OPTS: [&str; 2] = ["--storage-driver", "vfs"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `podman run --rm` of `image` with `args` (options, then the image's
/// arguments after `image`).
fn run(image: &str, options: &[&str], args: &[&str]) -> anyhow::Result<Output> {
    Command::new("podman")
        .args(PODMAN_OPTS)
        .args(["--runtime", "runc", "run", "--rm", "--network", "none"])
        .args([
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
        ])
        .args(options)
        .arg(image)
        .args(args)
        .output()
        .context("podman (Debian's podman and runc; scripts/test-deps installs them)")
}

#[test]
fn the_image_builds_from_scratch_and_runs_as_a_non_root_user() -> anyhow::Result<()> {
    let tag = format!("localhost/relaymesh-test:{}", std::process::id());
    let built = Command::new(repo().join("scripts/build-image"))
        .arg("--bin-dir")
        .arg(bin_dir()?)
        .arg(&tag)
        .env("PODMAN_OPTS", PODMAN_OPTS.join(" "))
        .output()?;
    ensure!(
        built.status.success(),
        "scripts/build-image: {}{}",
        text(&built.stdout),
        text(&built.stderr)
    );
    let result = check(&tag);
    let _ = Command::new("podman")
        .args(PODMAN_OPTS)
        .args(["rmi", "--force", &tag])
        .output();
    result
}

fn check(tag: &str) -> anyhow::Result<()> {
    let version = env!("CARGO_PKG_VERSION");
    let relay = run(tag, &[], &["--version"])?;
    ensure!(
        relay.status.success(),
        "relay --version: {}",
        text(&relay.stderr)
    );
    assert_eq!(text(&relay.stdout).trim(), format!("relay {version}"));
    let agent = run(tag, &["--entrypoint", "/edge-agent"], &["--version"])?;
    assert_eq!(text(&agent.stdout).trim(), format!("edge-agent {version}"));

    // The image's user, and the process really runs as it: `/` is root's.
    let user = Command::new("podman")
        .args(PODMAN_OPTS)
        .args(["image", "inspect", "--format", "{{.Config.User}}", tag])
        .output()?;
    assert_eq!(text(&user.stdout).trim(), "65532:65532");
    let init = [
        "init",
        "--data-dir",
        "/probe",
        "--name",
        "probe",
        "--listen",
        "127.0.0.1:7000",
        "--api-listen",
        "127.0.0.1:6443",
    ];
    let as_image_user = run(tag, &[], &init)?;
    let stderr = text(&as_image_user.stderr);
    ensure!(!as_image_user.status.success(), "non-root wrote to /");
    ensure!(stderr.contains("Permission denied"), "{stderr}");
    let as_root = run(tag, &["--user", "0"], &init)?;
    ensure!(
        as_root.status.success(),
        "as root: {}{}",
        text(&as_root.stdout),
        text(&as_root.stderr)
    );
    Ok(())
}
