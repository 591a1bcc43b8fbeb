//! Reading manifests the way `kubectl apply -f` does: a file, a directory of
//! `.yaml`/`.yml`/`.json` files, or standard input (`-`); YAML files may hold
//! several documents, and a `List` stands for its items.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why manifests could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML or JSON.
    #[error("{path}: document {index}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The document's position in the file, from 1.
        index: usize,
        /// The parser's message.
        message: String,
    },
    /// A document is not a Kubernetes object.
    #[error("{path}: document {index}: {message}")]
    NotAnObject {
        /// The file.
        path: String,
        /// The document's position, from 1.
        index: usize,
        /// What is missing.
        message: String,
    },
}

/// Reads every object from `source` (a path or `-`), in file order.
pub fn read(source: &str) -> Result<Vec<Value>, ManifestError> {
    if source == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|source| {
            ManifestError::Read {
                path: "-".into(),
                source,
            }
        })?;
        return parse(&text, "-");
    }
    let path = Path::new(source);
    let read_error = |source| ManifestError::Read {
        path: path.display().to_string(),
        source,
    };
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(read_error)?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|file| {
                file.extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json")
            })
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| ManifestError::Read {
            path: file.display().to_string(),
            source,
        })?;
        objects.extend(parse(&text, &file.display().to_string())?);
    }
    Ok(objects)
}

/// Parses the documents of one file.
pub fn parse(text: &str, path: &str) -> Result<Vec<Value>, ManifestError> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let index = index + 1;
        let value: Value =
            serde::Deserialize::deserialize(document).map_err(|error| ManifestError::Parse {
                path: path.to_string(),
                index,
                message: error.to_string(),
            })?;
        match value {
            Value::Null => continue,
            Value::Object(_) => {}
            _ => {
                return Err(ManifestError::NotAnObject {
                    path: path.to_string(),
                    index,
                    message: "a document must be a mapping".into(),
                })
            }
        }
        let missing = |field: &str| ManifestError::NotAnObject {
            path: path.to_string(),
            index,
            message: format!("{field} is required"),
        };
        if value.get("kind").and_then(Value::as_str).is_none() {
            return Err(missing("kind"));
        }
        if value.get("apiVersion").and_then(Value::as_str).is_none() {
            return Err(missing("apiVersion"));
        }
        if value["kind"]
            .as_str()
            .is_some_and(|kind| kind.ends_with("List"))
        {
            if let Some(items) = value.get("items").and_then(Value::as_array) {
                objects.extend(items.iter().cloned());
                continue;
            }
        }
        objects.push(value);
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_documents_lists_and_refuses_junk() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n";
        let objects = parse(text, "x.yaml").expect("parses");
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["kind"], "Secret");
        assert!(matches!(
            parse("kind: ConfigMap\n", "x.yaml"),
            Err(ManifestError::NotAnObject { index: 1, .. })
        ));
        assert!(matches!(
            parse("a: [\n", "x.yaml"),
            Err(ManifestError::Parse { .. })
        ));
        assert!(matches!(
            parse("- 1\n", "x.yaml"),
            Err(ManifestError::NotAnObject { .. })
        ));
    }

    #[test]
    fn reads_a_directory_in_name_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("b.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
        )
        .expect("write");
        std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
        let objects = read(&dir.path().display().to_string()).expect("reads");
        let names: Vec<&str> = objects
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, vec!["a", "b"]);
    }
}
