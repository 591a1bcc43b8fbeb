use super::*;

const CA: &str = "-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n";
const CERT: &str = "-----BEGIN CERTIFICATE-----\nY2VydA==\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\na2V5\n-----END PRIVATE KEY-----\n";

fn temporary_directory() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

#[test]
fn admin_kubeconfig_round_trips() {
    let directory = temporary_directory();
    let path = directory.path().join("root.kubeconfig");
    let text = admin_kubeconfig("relaymesh", "https://127.0.0.1:6443", CA, CERT, KEY);
    write_private(&path, &text).expect("written");
    let credentials = load_file(&path, None).expect("loaded");
    assert_eq!(
        credentials,
        ClientCredentials {
            server: "https://127.0.0.1:6443".into(),
            ca_pem: Some(CA.into()),
            cert_pem: Some(CERT.into()),
            key_pem: Some(KEY.into()),
            insecure_skip_tls_verify: false,
        }
    );
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    assert_eq!(yaml["current-context"].as_str(), Some("relaymesh"));
    assert_eq!(yaml["kind"].as_str(), Some("Config"));
    assert_eq!(
        yaml["clusters"][0]["cluster"]["certificate-authority-data"].as_str(),
        Some(STANDARD.encode(CA).as_str())
    );
}

#[cfg(unix)]
#[test]
fn write_private_is_owner_only_and_replaces() {
    use std::os::unix::fs::PermissionsExt;
    let directory = temporary_directory();
    let path = directory.path().join("config");
    fs::write(&path, "old").expect("an old file");
    write_private(&path, "new").expect("written");
    assert_eq!(fs::read_to_string(&path).expect("readable"), "new");
    let mode = fs::metadata(&path).expect("metadata").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let names: Vec<_> = fs::read_dir(directory.path())
        .expect("listable")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name())
        .collect();
    assert_eq!(names, ["config"], "no temporary file is left behind");
}

#[test]
fn relative_files_and_named_context() {
    let directory = temporary_directory();
    fs::create_dir(directory.path().join("pki")).expect("a subdirectory");
    fs::write(directory.path().join("pki/ca.crt"), CA).expect("written");
    fs::write(directory.path().join("pki/admin.crt"), CERT).expect("written");
    fs::write(directory.path().join("pki/admin.key"), KEY).expect("written");
    let text = "\
apiVersion: v1
kind: Config
current-context: other
clusters:
- name: mesh
  cluster:
    server: https://root:6443
    certificate-authority: pki/ca.crt
- name: lab
  cluster:
    server: https://lab:6443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate: pki/admin.crt
    client-key: pki/admin.key
contexts:
- name: mesh
  context: {cluster: mesh, user: admin}
- name: lab
  context: {cluster: lab, user: admin}
";
    let path = directory.path().join("config");
    fs::write(&path, text).expect("written");
    let mesh = load_file(&path, Some("mesh")).expect("loaded");
    assert_eq!(mesh.server, "https://root:6443");
    assert_eq!(mesh.ca_pem.as_deref(), Some(CA));
    assert_eq!(mesh.key_pem.as_deref(), Some(KEY));
    let lab = load_file(&path, Some("lab")).expect("loaded");
    assert!(lab.insecure_skip_tls_verify);
    assert_eq!(lab.ca_pem, None);

    // The current context does not exist.
    let error = load_file(&path, None).expect_err("no context named other");
    assert!(
        matches!(&error, KubeconfigError::Missing { what: "context", name, .. } if name == "other"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("context named \"other\""),
        "{error}"
    );
}

#[test]
fn errors_say_what_is_missing() {
    let directory = temporary_directory();
    let path = directory.path().join("config");
    fs::write(
        &path,
        "contexts:\n- name: c\n  context: {cluster: gone, user: u}\ncurrent-context: c\n",
    )
    .expect("written");
    let error = load_file(&path, None).expect_err("no cluster");
    assert!(
        matches!(
            error,
            KubeconfigError::Missing {
                what: "cluster",
                ..
            }
        ),
        "{error:?}"
    );

    fs::write(&path, "clusters: []\n").expect("written");
    assert!(matches!(
        load_file(&path, None),
        Err(KubeconfigError::NoCurrentContext { .. })
    ));

    fs::write(&path, "clusters: {not: a list}\n").expect("written");
    assert!(matches!(
        load_file(&path, None),
        Err(KubeconfigError::Parse { .. })
    ));

    let missing = directory.path().join("absent");
    let error = load_file(&missing, None).expect_err("no file");
    assert!(error.to_string().contains("absent"), "{error}");
}

#[test]
fn resolves_like_kubectl() {
    let directory = temporary_directory();
    let first = directory.path().join("first");
    let second = directory.path().join("second");
    fs::write(&second, "").expect("written");
    let home = directory.path().join("home");
    fs::create_dir_all(home.join(".kube")).expect("a home");

    let explicit = Path::new("/explicit/config");
    let list = std::env::join_paths([&first, &second]).expect("joinable");
    assert_eq!(
        resolve_path(Some(explicit), Some(&list), Some(&home)).ok(),
        Some(explicit.to_path_buf())
    );
    // The first existing file of the list.
    assert_eq!(
        resolve_path(None, Some(&list), Some(&home)).ok(),
        Some(second.clone())
    );
    // Then ~/.kube/config, if it exists.
    assert!(matches!(
        resolve_path(None, Some(OsStr::new("")), Some(&home)),
        Err(KubeconfigError::NotFound)
    ));
    fs::write(home.join(".kube/config"), "").expect("written");
    assert_eq!(
        resolve_path(None, Some(first.as_os_str()), Some(&home)).ok(),
        Some(home.join(".kube/config"))
    );
    assert_eq!(
        resolve_path(None, None, Some(&home)).ok(),
        Some(home.join(".kube/config"))
    );
}
