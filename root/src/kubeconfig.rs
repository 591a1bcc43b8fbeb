//! Kubeconfig files, as kubectl writes and reads them.
//!
//! [`admin_kubeconfig`] writes the file `relay init` hands the operator;
//! [`load`] finds and reads one the way kubectl does (explicit path, then the
//! first existing file of `KUBECONFIG`, then `~/.kube/config`) and returns what
//! a client needs to reach the root. Only client-certificate authentication is
//! understood: it is the only kind the root accepts. Several files are not
//! merged.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// What a client needs to reach an API server.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientCredentials {
    /// The server's URL, as `https://host:6443`.
    pub server: String,
    /// The CA certificate(s) that sign the server's certificate (PEM).
    pub ca_pem: Option<String>,
    /// The client certificate chain (PEM).
    pub cert_pem: Option<String>,
    /// The client certificate's private key (PEM).
    pub key_pem: Option<String>,
    /// Accept any server certificate (kubectl's `insecure-skip-tls-verify`).
    pub insecure_skip_tls_verify: bool,
}

impl std::fmt::Debug for ClientCredentials {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("server", &self.server)
            .field("has_ca", &self.ca_pem.is_some())
            .field("has_cert", &self.cert_pem.is_some())
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .finish_non_exhaustive()
    }
}

/// Why a kubeconfig could not be found or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeconfigError {
    /// No kubeconfig was given and none exists where kubectl looks.
    #[error("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config")]
    NotFound,
    /// A file (the kubeconfig or one it refers to) cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig is not valid YAML of the expected shape.
    #[error("{} is not a valid kubeconfig", path.display())]
    Parse {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// No context was asked for and the file has no `current-context`.
    #[error("{} has no current-context; pass --context", path.display())]
    NoCurrentContext {
        /// The kubeconfig.
        path: PathBuf,
    },
    /// A context, cluster or user named by the file or the caller is not in it.
    #[error("{} has no {what} named {name:?}", path.display())]
    Missing {
        /// The kubeconfig.
        path: PathBuf,
        /// `context`, `cluster` or `user`.
        what: &'static str,
        /// The name looked for.
        name: String,
    },
    /// A `*-data` field is not base64 of UTF-8 text.
    #[error("{}: {field} is not base64-encoded PEM", path.display())]
    Data {
        /// The kubeconfig.
        path: PathBuf,
        /// The field, as `users[admin].client-key-data`.
        field: String,
    },
}

/// A kubeconfig for the admin: one cluster, user and context, all named
/// `cluster_name`, with the certificates and key inline (`*-data`, base64 of
/// the PEM text), and that context current.
pub fn admin_kubeconfig(
    cluster_name: &str,
    server_url: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> String {
    let config = Config {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: cluster_name.into(),
            cluster: Cluster {
                server: server_url.into(),
                certificate_authority_data: Some(STANDARD.encode(ca_pem)),
                ..Cluster::default()
            },
        }],
        users: vec![NamedUser {
            name: cluster_name.into(),
            user: User {
                client_certificate_data: Some(STANDARD.encode(cert_pem)),
                client_key_data: Some(STANDARD.encode(key_pem)),
                ..User::default()
            },
        }],
        contexts: vec![NamedContext {
            name: cluster_name.into(),
            context: Context {
                cluster: cluster_name.into(),
                user: cluster_name.into(),
            },
        }],
        current_context: Some(cluster_name.into()),
    };
    // Strings, options and lists of plain structs always serialize.
    serde_yaml::to_string(&config).unwrap_or_default()
}

/// Writes `contents` to `path` readable by the owner only (mode 0600), so
/// that readers see the old file or the whole new one, never a part: the text
/// goes to a temporary file in the same directory which is then renamed.
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = path.file_name().unwrap_or(OsStr::new("kubeconfig"));
    let mut temporary_name = OsStr::new(".").to_os_string();
    temporary_name.push(file_name);
    temporary_name.push(format!(".tmp-{}", std::process::id()));
    let temporary = directory.join(temporary_name);
    // A leftover of a crashed write may have other permissions: start afresh.
    let _ = fs::remove_file(&temporary);
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(contents.as_bytes())?;
        file.sync_all()
    });
    if let Err(error) = written.and_then(|()| fs::rename(&temporary, path)) {
        let _ = fs::remove_file(&temporary);
        return Err(error);
    }
    Ok(())
}

/// Finds the kubeconfig as kubectl does and reads the credentials of
/// `context`, or of its current context.
///
/// The file is `path` if given, else the first existing file of the
/// `KUBECONFIG` list, else `~/.kube/config`. File paths inside it are relative
/// to its directory.
pub fn load(
    path: Option<&Path>,
    context: Option<&str>,
) -> Result<ClientCredentials, KubeconfigError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = resolve_path(
        path,
        std::env::var_os("KUBECONFIG").as_deref(),
        home.as_deref(),
    )?;
    load_file(&path, context)
}

/// Which kubeconfig kubectl would read, given an explicit path, the value of
/// `KUBECONFIG` and the home directory.
pub fn resolve_path(
    explicit: Option<&Path>,
    kubeconfig_env: Option<&OsStr>,
    home: Option<&Path>,
) -> Result<PathBuf, KubeconfigError> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    if let Some(list) = kubeconfig_env {
        let found = std::env::split_paths(list)
            .filter(|path| !path.as_os_str().is_empty())
            .find(|path| path.is_file());
        if let Some(path) = found {
            return Ok(path);
        }
    }
    home.map(|home| home.join(".kube").join("config"))
        .filter(|path| path.is_file())
        .ok_or(KubeconfigError::NotFound)
}

/// Reads the credentials of `context` (or the current context) from the
/// kubeconfig at `path`.
pub fn load_file(path: &Path, context: Option<&str>) -> Result<ClientCredentials, KubeconfigError> {
    let text = fs::read_to_string(path).map_err(|source| KubeconfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config: Config = serde_yaml::from_str(&text).map_err(|source| KubeconfigError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let missing = |what, name: &str| KubeconfigError::Missing {
        path: path.to_path_buf(),
        what,
        name: name.to_string(),
    };
    let context_name = match context.or(config.current_context.as_deref()) {
        Some(name) if !name.is_empty() => name,
        _ => {
            return Err(KubeconfigError::NoCurrentContext {
                path: path.to_path_buf(),
            })
        }
    };
    let context = &config
        .contexts
        .iter()
        .find(|named| named.name == context_name)
        .ok_or_else(|| missing("context", context_name))?
        .context;
    let cluster = &config
        .clusters
        .iter()
        .find(|named| named.name == context.cluster)
        .ok_or_else(|| missing("cluster", &context.cluster))?
        .cluster;
    let user = &config
        .users
        .iter()
        .find(|named| named.name == context.user)
        .ok_or_else(|| missing("user", &context.user))?
        .user;
    let source = Source {
        kubeconfig: path,
        directory: path.parent().unwrap_or(Path::new(".")),
    };
    Ok(ClientCredentials {
        server: cluster.server.clone(),
        ca_pem: source.pem(
            cluster.certificate_authority_data.as_deref(),
            cluster.certificate_authority.as_deref(),
            &format!("clusters[{}].certificate-authority-data", context.cluster),
        )?,
        cert_pem: source.pem(
            user.client_certificate_data.as_deref(),
            user.client_certificate.as_deref(),
            &format!("users[{}].client-certificate-data", context.user),
        )?,
        key_pem: source.pem(
            user.client_key_data.as_deref(),
            user.client_key.as_deref(),
            &format!("users[{}].client-key-data", context.user),
        )?,
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
    })
}

/// Where a kubeconfig's data comes from, for resolving its fields.
struct Source<'a> {
    kubeconfig: &'a Path,
    directory: &'a Path,
}

impl Source<'_> {
    /// The PEM text of an inline `*-data` field, else of the file it names
    /// (relative to the kubeconfig's directory); the inline data wins, as in
    /// kubectl.
    fn pem(
        &self,
        data: Option<&str>,
        file: Option<&str>,
        field: &str,
    ) -> Result<Option<String>, KubeconfigError> {
        if let Some(data) = data.filter(|data| !data.is_empty()) {
            let invalid = || KubeconfigError::Data {
                path: self.kubeconfig.to_path_buf(),
                field: field.to_string(),
            };
            let bytes = STANDARD.decode(data.trim()).map_err(|_| invalid())?;
            return String::from_utf8(bytes).map(Some).map_err(|_| invalid());
        }
        let Some(file) = file.filter(|file| !file.is_empty()) else {
            return Ok(None);
        };
        let path = self.directory.join(file);
        fs::read_to_string(&path)
            .map(Some)
            .map_err(|source| KubeconfigError::Read { path, source })
    }
}

/// A kubeconfig file (`clientcmd/api/v1.Config`), the parts relaymesh uses.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Config {
    #[serde(rename = "apiVersion", skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current_context: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate_authority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate_authority_data: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    insecure_skip_tls_verify: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_certificate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_certificate_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key_data: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct NamedContext {
    name: String,
    context: Context,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Context {
    cluster: String,
    user: String,
}

#[cfg(test)]
mod tests;
