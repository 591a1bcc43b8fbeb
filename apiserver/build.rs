//! Compiles Kubernetes' protobuf definitions in `proto/` (see its README)
//! for `src/protobuf.rs`, with protox, so no `protoc` is needed:
//!
//! - `$OUT_DIR/kubernetes.bin`: the `FileDescriptorSet` of every file there,
//!   without comments, read at run time by prost-reflect;
//! - `$OUT_DIR/protobuf_tables.rs`: which proto package holds each API
//!   group version (from `proto/transformed.json`) and where the JSON form
//!   differs from the messages (from `proto/json-names.tsv`), each entry
//!   checked here against the descriptors, so a refresh that breaks one
//!   fails the build instead of a request.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prost::Message as _;

/// API group versions that have a proto package but no REST resource, so
/// `transformed.json` does not name them.
const WITHOUT_RESOURCES: &[(&str, &str)] = &[
    ("admission.k8s.io/v1", "api.admission.v1"),
    ("apidiscovery.k8s.io/v2", "api.apidiscovery.v2"),
    ("meta.k8s.io/v1", "apimachinery.pkg.apis.meta.v1"),
];

fn main() -> Result<(), Box<dyn Error>> {
    let proto = Path::new("proto");
    println!("cargo::rerun-if-changed=proto");
    let mut files = Vec::new();
    collect(proto, proto, &mut files)?;
    files.sort();
    let mut compiler = protox::Compiler::new([proto])?;
    compiler.include_imports(true).open_files(&files)?;
    let pool = compiler.descriptor_pool();
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("kubernetes.bin"),
        compiler.file_descriptor_set().encode_to_vec(),
    )?;

    let mut tables = String::new();
    writeln!(tables, "/// (apiVersion, proto package), sorted.")?;
    writeln!(tables, "const API_VERSIONS: &[(&str, &str)] = &[")?;
    for (api_version, package) in api_versions(proto, &pool)? {
        writeln!(tables, "    ({api_version:?}, {package:?}),")?;
    }
    writeln!(tables, "];")?;
    let names = std::fs::read_to_string(proto.join("json-names.tsv"))?;
    let (mut renamed, mut inlined, mut lists) = (String::new(), String::new(), String::new());
    for line in names.lines().filter(|line| !line.starts_with('#')) {
        let columns: Vec<&str> = line.split('\t').collect();
        let field = |message: &str, field: &str| {
            pool.get_message_by_name(message)
                .and_then(|message| message.get_field_by_name(field))
                .ok_or_else(|| format!("json-names.tsv: {message}.{field} is not in proto/"))
        };
        match columns[..] {
            ["rename", message, name, json] => {
                field(message, name)?;
                writeln!(renamed, "    ({message:?}, {name:?}, {json:?}),")?;
            }
            ["inline", message, name] => {
                if field(message, name)?.kind().as_message().is_none() {
                    return Err(format!("json-names.tsv: {message}.{name} is not a message").into());
                }
                writeln!(inlined, "    ({message:?}, {name:?}),")?;
            }
            ["list", message, name] => {
                if !field(message, name)?.is_list() {
                    return Err(format!("json-names.tsv: {message}.{name} is not repeated").into());
                }
                writeln!(lists, "    {message:?},")?;
            }
            _ => return Err(format!("json-names.tsv: cannot read {line:?}").into()),
        }
    }
    writeln!(tables, "/// (message, proto field, JSON name).")?;
    writeln!(
        tables,
        "const RENAMED: &[(&str, &str, &str)] = &[\n{renamed}];"
    )?;
    writeln!(
        tables,
        "/// (message, field) whose fields JSON writes in the message."
    )?;
    writeln!(tables, "const INLINED: &[(&str, &str)] = &[\n{inlined}];")?;
    writeln!(
        tables,
        "/// Messages JSON writes as the bare list of their `items`."
    )?;
    writeln!(tables, "const LISTS: &[&str] = &[\n{lists}];")?;
    std::fs::write(out.join("protobuf_tables.rs"), tables)?;
    Ok(())
}

/// The `generated.proto` files under `directory`, relative to `root`.
fn collect(root: &Path, directory: &Path, files: &mut Vec<PathBuf>) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(directory)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, files)?;
        } else if path
            .file_name()
            .is_some_and(|name| name == "generated.proto")
        {
            files.push(path.strip_prefix(root)?.to_path_buf());
        }
    }
    Ok(())
}

/// Each API group version's proto package: the package of the messages
/// `transformed.json` gives for its resources, when that package is here.
fn api_versions(
    proto: &Path,
    pool: &prost_reflect::DescriptorPool,
) -> Result<BTreeMap<String, String>, Box<dyn Error>> {
    let transformed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(proto.join("transformed.json"))?)?;
    let resources = transformed
        .as_object()
        .ok_or("transformed.json is not an object")?;
    let mut packages = BTreeMap::new();
    for resource in resources.values() {
        let (Some(api_version), Some(message)) =
            (resource["apiVersion"].as_str(), resource["proto"].as_str())
        else {
            return Err(format!("transformed.json: no apiVersion or proto in {resource}").into());
        };
        let Some(message) = pool.get_message_by_name(message) else {
            continue; // a group version not copied into proto/
        };
        let package = message.package_name().to_string();
        if let Some(other) = packages.insert(api_version.to_string(), package.clone()) {
            if other != package {
                return Err(format!("{api_version} is in both {other} and {package}").into());
            }
        }
    }
    for (api_version, package) in WITHOUT_RESOURCES {
        if !pool
            .all_messages()
            .any(|message| message.package_name() == *package)
        {
            return Err(format!("{package} is not in proto/").into());
        }
        packages.insert(api_version.to_string(), package.to_string());
    }
    Ok(packages)
}
