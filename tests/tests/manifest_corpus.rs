//! The manifest corpus (`tests/data/k8s-1.33/`, one valid object of every
//! built-in kind of Kubernetes 1.33) against a real root with unmodified
//! kubectl: each object applies with validation on, reads back holding
//! everything that was submitted, and deletes; and the corpus has a file for
//! exactly the kinds the root's discovery says it serves.
//!
//! "Reads back" is the comparison a real kube-apiserver passes: every field
//! of the file is served with the same value, and the server sets `uid`,
//! `resourceVersion` and `creationTimestamp`. Extra fields are allowed, since
//! a real server fills per-kind defaults (the root leaves defaulting to the
//! edge clusters' API servers) and `kubectl apply` adds its
//! last-applied-configuration annotation.
//!
//! Every file is tried and every failure kept, so one run lists them all.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{bail, Context as _};
use relaymesh_tests::{kubectl, wait_for, Mesh};
use serde_json::Value;

const KUBECTL: &str = "/usr/bin/kubectl";

/// Where the corpus lives; `README.md` there says how to add a kind.
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/k8s-1.33");

/// The namespace every namespaced object of the corpus is in (the test
/// creates it; the corpus's own Namespace object is another one).
const NAMESPACE: &str = "corpus";

/// API groups that are relaymesh's own, not Kubernetes' built-in ones.
const OWN_GROUPS: [&str; 2] = ["relaymesh.dev", "multicluster.x-k8s.io"];

/// How long a deleted object may still be found.
const DELETION: Duration = Duration::from_secs(30);

/// How much of kubectl's output or of a value a failure message repeats.
const EXCERPT: usize = 1500;

#[test]
fn every_builtin_kind_applies_reads_back_and_deletes() -> anyhow::Result<()> {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return Ok(());
    }
    let corpus = Manifest::load_all(Path::new(CORPUS))?;
    let (mesh, _root) = Mesh::init()?;
    let kubeconfig = mesh.kubeconfig();
    // Before anything is applied: the corpus's CRD and APIService would add
    // groups of their own to discovery.
    let discovery = corpus_matches_discovery(&kubeconfig, &corpus).err();

    succeed(&kubeconfig, &["create", "namespace", NAMESPACE])?;
    let mut failures = Vec::new();
    for manifest in &corpus {
        let problems = manifest.round_trip(&kubeconfig)?;
        eprintln!(
            "{}: {}",
            manifest.file_name,
            if problems.is_empty() { "ok" } else { "FAILED" }
        );
        if !problems.is_empty() {
            failures.push(format!(
                "{}:\n    {}",
                manifest.file_name,
                problems.join("\n    ")
            ));
        }
    }

    if discovery.is_some() || !failures.is_empty() {
        let mut report = Vec::new();
        if let Some(error) = &discovery {
            report.push(format!("the discovery check: {error:#}"));
        }
        report.extend(failures.iter().cloned());
        bail!(
            "{} of {} corpus files failed{}:\n\n{}\n\nroot logs:{}",
            failures.len(),
            corpus.len(),
            if discovery.is_some() {
                ", and the discovery check"
            } else {
                ""
            },
            report.join("\n\n"),
            mesh.logs()
        );
    }
    Ok(())
}

/// One file of the corpus: a single object.
struct Manifest {
    path: PathBuf,
    file_name: String,
    /// The object as the file has it, as JSON.
    object: Value,
    /// `apps/v1`, `v1`, ...
    api_version: String,
    kind: String,
}

impl Manifest {
    /// Every `.yaml` file of `dir`, sorted by name. Fails if a file is not
    /// one object, is not named `<group or "core">.<kind in lower case>.yaml`
    /// after its content, or is a second file of a kind.
    fn load_all(dir: &Path) -> anyhow::Result<Vec<Self>> {
        let mut paths = Vec::new();
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path
                .extension()
                .is_some_and(|extension| extension == "yaml")
            {
                paths.push(path);
            }
        }
        paths.sort();
        let mut corpus: Vec<Self> = Vec::new();
        for path in paths {
            let manifest = Self::load(&path).with_context(|| format!("{}", path.display()))?;
            if let Some(other) = corpus.iter().find(|other| {
                other.api_version == manifest.api_version && other.kind == manifest.kind
            }) {
                bail!(
                    "{} and {} are both {} {}: the corpus has one object per kind",
                    other.file_name,
                    manifest.file_name,
                    manifest.api_version,
                    manifest.kind
                );
            }
            corpus.push(manifest);
        }
        if corpus.is_empty() {
            bail!("no corpus files in {}", dir.display());
        }
        Ok(corpus)
    }

    fn load(path: &Path) -> anyhow::Result<Self> {
        let file_name = path
            .file_name()
            .and_then(|name| name.to_str())
            .context("a UTF-8 file name")?
            .to_string();
        // serde_yaml refuses a stream of more than one document.
        let object: Value = serde_yaml::from_str(&std::fs::read_to_string(path)?)?;
        let api_version = object["apiVersion"]
            .as_str()
            .context("no apiVersion")?
            .to_string();
        let kind = object["kind"].as_str().context("no kind")?.to_string();
        let group = match api_version.rsplit_once('/') {
            Some((group, _version)) => group,
            None => "core",
        };
        let expected = format!("{group}.{}.yaml", kind.to_lowercase());
        if file_name != expected {
            bail!("a {api_version} {kind} belongs in {expected}");
        }
        for server_set in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            if object["metadata"].get(server_set).is_some() {
                bail!("metadata.{server_set} is the server's to set");
            }
        }
        if object.get("status").is_some() {
            bail!("status is the server's (and its controllers') to set");
        }
        Ok(Self {
            path: path.to_path_buf(),
            file_name,
            object,
            api_version,
            kind,
        })
    }

    /// Applies, reads back, deletes; returns what went wrong.
    fn round_trip(&self, kubeconfig: &Path) -> anyhow::Result<Vec<String>> {
        let file = self.path.to_str().context("a UTF-8 path")?;
        let mut problems = Vec::new();

        let applied = kubectl(
            kubeconfig,
            &["apply", "-f", file, "--validate=strict"],
            None,
        )?;
        if !applied.status.success() {
            problems.push(format!("apply --validate=strict: {}", stderr(&applied)));
            return Ok(problems);
        }
        let stdout = String::from_utf8_lossy(&applied.stdout);
        if !stdout.trim_end().ends_with(" created") {
            problems.push(format!("apply did not create the object: {stdout}"));
        }

        let read = kubectl(kubeconfig, &["get", "-f", file, "-o", "json"], None)?;
        if read.status.success() {
            match serde_json::from_slice::<Value>(&read.stdout) {
                Ok(served) => problems.extend(self.served_problems(&served)),
                Err(error) => problems.push(format!("get -o json is not JSON: {error}")),
            }
        } else {
            problems.push(format!("get -o json: {}", stderr(&read)));
        }

        let deleted = kubectl(kubeconfig, &["delete", "-f", file, "--wait=false"], None)?;
        if !deleted.status.success() {
            problems.push(format!("delete: {}", stderr(&deleted)));
            return Ok(problems);
        }
        let gone = wait_for("the deleted object to be NotFound", DELETION, || {
            let read = kubectl(kubeconfig, &["get", "-f", file, "-o", "name"], None)?;
            if read.status.success() {
                return Ok(None);
            }
            let message = stderr(&read);
            if message.contains("NotFound") {
                Ok(Some(()))
            } else {
                bail!("get after delete failed, but not with NotFound: {message}")
            }
        });
        if let Err(error) = gone {
            problems.push(format!("after delete: {error:#}"));
        }
        Ok(problems)
    }

    /// What is wrong with `served` as the read-back of this object.
    fn served_problems(&self, served: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(difference) = first_difference(&self.object, served, &mut String::new()) {
            problems.push(format!("read back: {difference}"));
        }
        for server_set in ["uid", "resourceVersion"] {
            if served["metadata"][server_set]
                .as_str()
                .is_none_or(str::is_empty)
            {
                problems.push(format!("read back: no metadata.{server_set}"));
            }
        }
        match served["metadata"]["creationTimestamp"].as_str() {
            Some(stamp) if is_rfc3339_seconds(stamp) => {}
            other => problems.push(format!(
                "read back: metadata.creationTimestamp is {other:?}, not RFC 3339 in seconds"
            )),
        }
        problems
    }
}

/// The first place where `served` does not hold what `submitted` holds, as
/// a path (`.spec.ports[0].port`) and the two values. Objects may have more
/// fields served than submitted; lists must be as long; numbers compare as
/// numbers (`1` is `1.0`).
fn first_difference(submitted: &Value, served: &Value, path: &mut String) -> Option<String> {
    match (submitted, served) {
        (Value::Object(submitted), Value::Object(served)) => {
            for (key, value) in submitted {
                let length = path.len();
                push_key(path, key);
                let difference = match served.get(key) {
                    None => Some(format!("{path}: missing (submitted {})", excerpt(value))),
                    Some(served) => first_difference(value, served, path),
                };
                path.truncate(length);
                if difference.is_some() {
                    return difference;
                }
            }
            None
        }
        (Value::Array(submitted), Value::Array(served)) if submitted.len() == served.len() => {
            for (index, (value, served)) in submitted.iter().zip(served).enumerate() {
                let length = path.len();
                let _ = write!(path, "[{index}]");
                let difference = first_difference(value, served, path);
                path.truncate(length);
                if difference.is_some() {
                    return difference;
                }
            }
            None
        }
        (Value::Number(submitted), Value::Number(served))
            if submitted.as_f64() == served.as_f64() =>
        {
            None
        }
        _ if submitted == served => None,
        _ => Some(format!(
            "{}: submitted {}, served {}",
            if path.is_empty() { "." } else { path },
            excerpt(submitted),
            excerpt(served)
        )),
    }
}

/// Appends `.key`, or `["key"]` when the key is not a plain identifier (as
/// label keys are).
fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        let _ = write!(path, ".{key}");
    } else {
        let _ = write!(path, "[{key:?}]");
    }
}

/// Whether `stamp` is `YYYY-MM-DDTHH:MM:SSZ`, as kube-apiserver writes a
/// `metav1.Time`.
fn is_rfc3339_seconds(stamp: &str) -> bool {
    let bytes = stamp.as_bytes();
    bytes.len() == 20
        && bytes.iter().enumerate().all(|(index, byte)| match index {
            4 | 7 => *byte == b'-',
            10 => *byte == b'T',
            13 | 16 => *byte == b':',
            19 => *byte == b'Z',
            _ => byte.is_ascii_digit(),
        })
}

/// Checks that the kinds the root's discovery lists as stored objects
/// (top-level resources with the `create` and `get` verbs) in built-in
/// groups are exactly the kinds of the corpus.
fn corpus_matches_discovery(kubeconfig: &Path, corpus: &[Manifest]) -> anyhow::Result<()> {
    let mut group_versions = vec!["v1".to_string()];
    let groups = raw_json(kubeconfig, "/apis")?;
    for group in groups["groups"].as_array().context("no groups in /apis")? {
        let name = group["name"].as_str().unwrap_or_default();
        if OWN_GROUPS.contains(&name) {
            continue;
        }
        for version in group["versions"].as_array().into_iter().flatten() {
            if let Some(group_version) = version["groupVersion"].as_str() {
                group_versions.push(group_version.to_string());
            }
        }
    }
    // "apiVersion Kind" → the plural it is served as.
    let mut served = BTreeMap::new();
    for group_version in &group_versions {
        let path = if group_version == "v1" {
            "/api/v1".to_string()
        } else {
            format!("/apis/{group_version}")
        };
        let list = raw_json(kubeconfig, &path)?;
        for resource in list["resources"].as_array().into_iter().flatten() {
            let name = resource["name"].as_str().unwrap_or_default();
            let has = |verb: &str| {
                resource["verbs"]
                    .as_array()
                    .is_some_and(|verbs| verbs.iter().any(|v| v == verb))
            };
            if name.contains('/') || !has("create") || !has("get") {
                continue; // a subresource, or not a stored object
            }
            let kind = resource["kind"].as_str().unwrap_or_default();
            served.insert(format!("{group_version} {kind}"), name.to_string());
        }
    }
    let in_corpus: BTreeSet<String> = corpus
        .iter()
        .map(|manifest| format!("{} {}", manifest.api_version, manifest.kind))
        .collect();
    let without_file: Vec<String> = served
        .iter()
        .filter(|(kind, _)| !in_corpus.contains(*kind))
        .map(|(kind, plural)| format!("{kind} ({plural})"))
        .collect();
    let not_served: Vec<&String> = in_corpus
        .iter()
        .filter(|kind| !served.contains_key(*kind))
        .collect();
    if !without_file.is_empty() || !not_served.is_empty() {
        bail!(
            "discovery lists {} creatable kinds in built-in groups, the corpus has {} files;\n    \
             served without a corpus file: {without_file:?}\n    \
             in the corpus, not in discovery: {not_served:?}",
            served.len(),
            corpus.len()
        );
    }
    eprintln!(
        "discovery: {} kinds in built-in groups, a corpus file for each",
        served.len()
    );
    Ok(())
}

/// `kubectl get --raw PATH`, as JSON.
fn raw_json(kubeconfig: &Path, path: &str) -> anyhow::Result<Value> {
    let output = succeed(kubeconfig, &["get", "--raw", path])?;
    serde_json::from_slice(&output.stdout).with_context(|| format!("{path} is not JSON"))
}

/// Runs kubectl, which must succeed.
fn succeed(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Output> {
    let output = kubectl(kubeconfig, args, None)?;
    if !output.status.success() {
        bail!("kubectl {}: {}", args.join(" "), stderr(&output));
    }
    Ok(output)
}

fn stderr(output: &Output) -> String {
    excerpt(String::from_utf8_lossy(&output.stderr).trim())
}

/// `value` as text, cut to [`EXCERPT`] characters.
fn excerpt(value: impl std::fmt::Display) -> String {
    let text = value.to_string();
    match text.char_indices().nth(EXCERPT) {
        Some((end, _)) => format!("{} …", &text[..end]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn difference(submitted: &Value, served: &Value) -> Option<String> {
        first_difference(submitted, served, &mut String::new())
    }

    #[test]
    fn served_may_add_fields_but_not_change_or_drop_any() {
        let submitted = json!({
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 1, "ports": [{"port": 80}]},
        });
        let served = json!({
            "metadata": {
                "name": "web",
                "uid": "0d6c2a4e",
                "labels": {"app.kubernetes.io/name": "web"},
            },
            "spec": {"replicas": 1.0, "ports": [{"port": 80, "protocol": "TCP"}]},
            "status": {},
        });
        assert_eq!(difference(&submitted, &served), None);

        let mut relabelled = served.clone();
        relabelled["metadata"]["labels"]["app.kubernetes.io/name"] = json!("api");
        assert_eq!(
            difference(&submitted, &relabelled).as_deref(),
            Some(r#".metadata.labels["app.kubernetes.io/name"]: submitted "web", served "api""#)
        );

        let mut dropped = served.clone();
        dropped["spec"]
            .as_object_mut()
            .expect("an object")
            .remove("replicas");
        assert_eq!(
            difference(&submitted, &dropped).as_deref(),
            Some(".spec.replicas: missing (submitted 1)")
        );

        let mut retyped = served.clone();
        retyped["spec"]["ports"][0]["port"] = json!("80");
        assert_eq!(
            difference(&submitted, &retyped).as_deref(),
            Some(r#".spec.ports[0].port: submitted 80, served "80""#)
        );

        let mut longer = served;
        longer["spec"]["ports"]
            .as_array_mut()
            .expect("a list")
            .push(json!({"port": 443}));
        assert!(difference(&submitted, &longer)
            .is_some_and(|difference| difference.starts_with(".spec.ports: submitted [")));
    }

    #[test]
    fn creation_timestamps_are_rfc3339_in_seconds() {
        assert!(is_rfc3339_seconds("2025-06-01T12:00:00Z"));
        assert!(!is_rfc3339_seconds("2025-06-01T12:00:00.000000Z"));
        assert!(!is_rfc3339_seconds("2025-06-01T12:00:00+00:00"));
        assert!(!is_rfc3339_seconds(""));
    }
}
