//! The root's replicas in a fleet on etcd (`testbed up --etcd-members M
//! --root-replicas N`): the root (`relay init --store etcd`, advertising
//! every replica's QUIC address) and N-1 more (`relay init --join-root`
//! with the root's secrets key), each with its own API port and an admin
//! kubeconfig pointed at it in `replicas/NAME.kubeconfig`.

use std::path::PathBuf;

use anyhow::Context as _;
use tokio::process::Command;

use super::plan::ROOT;
use super::processes::run_logged;
use super::Fleet;

/// One replica of the root.
#[derive(Debug, Clone)]
pub struct RootReplica {
    /// Its name in the fleet (`root`, `root-2`, …): its data directory
    /// and log.
    pub name: String,
    /// Its API's port on 127.0.0.1.
    pub api_port: u16,
    /// Its QUIC port on 127.0.0.1.
    pub listen_port: u16,
}

/// The name of replica `index` (0 is the root itself).
pub fn replica_name(index: usize) -> String {
    if index == 0 {
        ROOT.to_string()
    } else {
        format!("{ROOT}-{}", index + 1)
    }
}

impl Fleet {
    /// The root's replicas, the root first (only the root unless the fleet
    /// was started with replicas).
    pub fn root_replicas(&self) -> &[RootReplica] {
        &self.replicas
    }

    /// The admin kubeconfig pointed at replica `name`.
    pub fn replica_kubeconfig(&self, name: &str) -> PathBuf {
        if name == ROOT {
            return self.root_kubeconfig();
        }
        self.dir.join("replicas").join(format!("{name}.kubeconfig"))
    }

    /// The replica holding the root's leader key in etcd, if any does (a
    /// killed leader's key lasts until its lease ends).
    pub fn root_leader(&self) -> anyhow::Result<Option<String>> {
        let etcd = self
            .etcd
            .as_ref()
            .context("the fleet's root is not on etcd")?;
        let connection = etcd.connect(relaymesh_root::objects_store::DEFAULT_ETCD_PREFIX)?;
        let Some((value, _)) =
            connection.get_value(relaymesh_root::replicas::election::LEADER_KEY)?
        else {
            return Ok(None);
        };
        let value = String::from_utf8_lossy(&value);
        Ok(self
            .replicas
            .iter()
            .find(|replica| value.starts_with(&format!("127.0.0.1:{}/", replica.api_port)))
            .map(|replica| replica.name.clone()))
    }

    /// Adds every replica after the root, which runs: `relay init
    /// --join-root`, a kubeconfig, `relay run`.
    pub(super) async fn start_replicas(&mut self, store_args: &[String]) -> anyhow::Result<()> {
        let key = self.data_dir(ROOT).join("secrets.key");
        let admin = std::fs::read_to_string(self.root_kubeconfig())?;
        let root_server = format!("127.0.0.1:{}", self.replicas[0].api_port);
        std::fs::create_dir_all(self.dir.join("replicas"))?;
        for replica in self.replicas.clone().into_iter().skip(1) {
            println!(
                "starting root replica {} (API on 127.0.0.1:{})",
                replica.name, replica.api_port
            );
            run_logged(
                Command::new(self.binary("relay"))
                    .args(["init", "--join-root", "--secrets-key"])
                    .arg(&key)
                    .arg("--data-dir")
                    .arg(self.data_dir(&replica.name))
                    .arg("--listen")
                    .arg(format!("127.0.0.1:{}", replica.listen_port))
                    .arg("--api-listen")
                    .arg(format!("127.0.0.1:{}", replica.api_port))
                    .args(store_args),
                &self.log(&replica.name),
            )
            .await?;
            let kubeconfig = self.replica_kubeconfig(&replica.name);
            let text = admin.replace(&root_server, &format!("127.0.0.1:{}", replica.api_port));
            write_private(&kubeconfig, &text)?;
            self.daemons.start(
                0,
                &replica.name,
                &self.binary("relay"),
                &self.data_dir(&replica.name),
                &[],
                &self.log(&replica.name),
            )?;
        }
        Ok(())
    }
}

/// Writes `text` to `path`, readable by its owner alone (it holds the admin
/// key).
fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())?;
    Ok(())
}
