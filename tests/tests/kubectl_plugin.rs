//! relayctl as a kubectl plugin (`kubectl relaymesh …`, relayctl installed
//! as `kubectl-relaymesh` on the PATH) and every program's shell
//! completions, loaded by a real bash.

use std::process::Command;

use relaymesh_tests::{binary, Mesh};

#[test]
fn kubectl_relaymesh_is_relayctl() -> anyhow::Result<()> {
    let (mesh, _root) = Mesh::init()?;
    let plugins = tempfile::tempdir()?;
    std::os::unix::fs::symlink(
        binary("relayctl")?,
        plugins.path().join("kubectl-relaymesh"),
    )?;
    let path = format!(
        "{}:{}",
        plugins.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let listed = Command::new("kubectl")
        .env("PATH", &path)
        .args(["plugin", "list"])
        .output()?;
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout.contains("kubectl-relaymesh"),
        "kubectl plugin list: {stdout}"
    );

    // kubectl finds the plugin; the plugin finds the kubeconfig as kubectl
    // does (KUBECONFIG here).
    let output = Command::new("kubectl")
        .env("PATH", &path)
        .env("KUBECONFIG", mesh.kubeconfig())
        .args(["relaymesh", "tree", "-o", "json"])
        .output()?;
    assert!(
        output.status.success(),
        "kubectl relaymesh tree: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(tree["name"], "root", "{tree}");
    Ok(())
}

#[test]
fn every_program_prints_completions_a_shell_loads() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for program in ["relay", "relayctl", "edge-agent", "testbed"] {
        let output = Command::new(binary(program)?)
            .args(["completions", "bash"])
            .output()?;
        assert!(output.status.success(), "{program} completions bash");
        let script = dir.path().join(format!("{program}.bash"));
        std::fs::write(&script, &output.stdout)?;
        // bash loads it and registers a completion for the program.
        let loaded = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {} && complete -p {program}",
                script.display()
            ))
            .output()?;
        assert!(
            loaded.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&loaded.stderr)
        );
        assert!(
            String::from_utf8_lossy(&loaded.stdout).contains(program),
            "{program}: {}",
            String::from_utf8_lossy(&loaded.stdout)
        );
        let zsh = Command::new(binary(program)?)
            .args(["completions", "zsh"])
            .output()?;
        assert!(
            String::from_utf8_lossy(&zsh.stdout).starts_with(&format!("#compdef {program}")),
            "{program} completions zsh"
        );
    }
    // relayctl names its completions after how it was called, so the
    // plugin completes as kubectl-relaymesh.
    let plugins = tempfile::tempdir()?;
    let plugin = plugins.path().join("kubectl-relaymesh");
    std::os::unix::fs::symlink(binary("relayctl")?, &plugin)?;
    let output = Command::new(&plugin)
        .args(["completions", "bash"])
        .output()?;
    assert!(String::from_utf8_lossy(&output.stdout).contains("kubectl-relaymesh"));
    Ok(())
}

/// Every program's `--help` examples paste as they print: no line is
/// wider than 80 columns (clap would wrap it in a narrow terminal, and a
/// wrapped command breaks), and bash parses the block.
#[test]
fn help_examples_paste_into_a_shell_as_printed() -> anyhow::Result<()> {
    for program in ["relay", "relayctl", "edge-agent"] {
        let output = Command::new(binary(program)?).arg("--help").output()?;
        let help = String::from_utf8_lossy(&output.stdout).into_owned();
        let examples: Vec<&str> = help
            .lines()
            .skip_while(|line| !line.starts_with("Examples:"))
            .skip(1)
            .collect();
        assert!(!examples.is_empty(), "{program} --help has no examples");
        for line in &examples {
            assert!(
                line.chars().count() <= 80,
                "{program} --help: an example line of {} columns: {line}",
                line.chars().count()
            );
        }
        let parsed = Command::new("bash")
            .arg("-n")
            .arg("-c")
            .arg(examples.join("\n"))
            .output()?;
        assert!(
            parsed.status.success(),
            "{program} --help examples: {}",
            String::from_utf8_lossy(&parsed.stderr)
        );
    }
    Ok(())
}
