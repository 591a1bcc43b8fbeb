//! The key that seals the root's secrets before they go into etcd (the API
//! CA's and the API server's private keys), and the sealing: ChaCha20-
//! Poly1305 with a random nonce, the record's name as associated data, so
//! a sealed value cannot be passed off as another one.
//!
//! The key lives in a file of the root's data directory, `secrets.key`
//! (base64 of 32 random bytes), made 0600 by `relay init --store etcd` and
//! `relay migrate-store`; a key file that group or others may read is
//! refused, as ssh refuses a private key.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom as _, SystemRandom};

/// The file name of the key in a root's data directory.
pub const SECRETS_KEY_FILE: &str = "secrets.key";

/// The first byte of a sealed value: the format.
const SEALED_FORMAT: u8 = 1;

/// Why the key or a sealed value could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// The key file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The key file may be read by others.
    #[error("{path} has mode {mode:04o}: the root's secrets key must be readable by its owner only (chmod 600 {path})")]
    TooOpen {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file does not hold a key.
    #[error("{path} does not hold a secrets key (base64 of 32 bytes)")]
    Malformed {
        /// The key file.
        path: PathBuf,
    },
    /// A sealed value could not be opened: another key sealed it, or it
    /// was changed.
    #[error("the root's secret {name:?} cannot be opened with this secrets key (another root's key, or the value was altered)")]
    Open {
        /// The secret's name.
        name: String,
    },
    /// The system's random source failed.
    #[error("no random bytes from the system")]
    Random,
}

/// The key that seals the root's secrets.
pub struct SecretsKey {
    key: LessSafeKey,
}

impl SecretsKey {
    /// Makes a new random key and writes it to `path` (0600; the file
    /// must not exist).
    pub fn create(path: &Path) -> Result<Self, SecretsError> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| SecretsError::Random)?;
        let io = |source| SecretsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        file.write_all(format!("{text}\n").as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
        Self::from_bytes(&bytes, path)
    }

    /// Copies the key file `from` (which must be private) to `to` (0600;
    /// it must not exist): a new replica's copy of the root's key.
    pub fn copy(from: &Path, to: &Path) -> Result<Self, SecretsError> {
        let key = Self::load(from)?;
        let io = |source| SecretsError::Io {
            path: to.to_path_buf(),
            source,
        };
        let text = std::fs::read(from).map_err(|source| SecretsError::Io {
            path: from.to_path_buf(),
            source,
        })?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to)
            .map_err(io)?;
        file.write_all(&text).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(key)
    }

    /// Reads the key at `path`, refusing a file others may read.
    pub fn load(path: &Path) -> Result<Self, SecretsError> {
        let io = |source| SecretsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(SecretsError::TooOpen {
                path: path.to_path_buf(),
                mode,
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| SecretsError::Malformed {
                path: path.to_path_buf(),
            })?;
        Self::from_bytes(&bytes, path)
    }

    fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self, SecretsError> {
        let malformed = || SecretsError::Malformed {
            path: path.to_path_buf(),
        };
        if bytes.len() != 32 {
            return Err(malformed());
        }
        let key = UnboundKey::new(&CHACHA20_POLY1305, bytes).map_err(|_| malformed())?;
        Ok(Self {
            key: LessSafeKey::new(key),
        })
    }

    /// `plaintext` sealed under the secret's `name`.
    pub fn seal(&self, name: &str, plaintext: &[u8]) -> Result<Vec<u8>, SecretsError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SecretsError::Random)?;
        let mut sealed = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| SecretsError::Random)?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(SEALED_FORMAT);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The plaintext of `sealed`, sealed under `name` with this key.
    pub fn open(&self, name: &str, sealed: &[u8]) -> Result<Vec<u8>, SecretsError> {
        let refused = || SecretsError::Open {
            name: name.to_string(),
        };
        let rest = match sealed.split_first() {
            Some((&SEALED_FORMAT, rest)) if rest.len() >= NONCE_LEN => rest,
            _ => return Err(refused()),
        };
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| refused())?;
        let mut buffer = ciphertext.to_vec();
        let plaintext = self
            .key
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut buffer)
            .map_err(|_| refused())?;
        Ok(plaintext.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_with_their_key_and_name_only() {
        let dir = tempfile::tempdir().expect("a directory");
        let key = SecretsKey::create(&dir.path().join("a.key")).expect("created");
        let other = SecretsKey::create(&dir.path().join("b.key")).expect("created");
        let sealed = key
            .seal("api-certificate", b"private bytes")
            .expect("sealed");
        assert!(!sealed
            .windows(b"private bytes".len())
            .any(|window| window == b"private bytes"));
        assert_eq!(
            key.open("api-certificate", &sealed).expect("opened"),
            b"private bytes"
        );
        assert!(matches!(
            other.open("api-certificate", &sealed),
            Err(SecretsError::Open { .. })
        ));
        assert!(matches!(
            key.open("api-ca-previous", &sealed),
            Err(SecretsError::Open { .. })
        ));
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert!(key.open("api-certificate", &altered).is_err());
        assert!(key.open("api-certificate", &[]).is_err());
    }

    #[test]
    fn a_key_file_is_made_0600_and_a_looser_one_is_refused() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join(SECRETS_KEY_FILE);
        let key = SecretsKey::create(&path).expect("created");
        let mode = std::fs::metadata(&path)
            .expect("there")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let sealed = key.seal("x", b"y").expect("sealed");
        let loaded = SecretsKey::load(&path).expect("loaded");
        assert_eq!(loaded.open("x", &sealed).expect("opened"), b"y");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        match SecretsKey::load(&path) {
            Err(error @ SecretsError::TooOpen { mode: 0o644, .. }) => {
                assert!(error.to_string().contains("chmod 600"), "{error}");
            }
            other => panic!("a 0644 key file must be refused, got {:?}", other.err()),
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::fs::write(&path, "not a key\n").expect("written");
        assert!(matches!(
            SecretsKey::load(&path),
            Err(SecretsError::Malformed { .. })
        ));
        assert!(
            SecretsKey::create(&path).is_err(),
            "an existing key is never overwritten"
        );
    }
}
