//! Every flag from a TOML file: `--config FILE` (or `RELAYMESH_CONFIG`)
//! names a file whose keys are the long flags of the command being run,
//! without their dashes, for systemd units and ConfigMaps alike:
//!
//! ```toml
//! data-dir = "/var/lib/relaymesh/relay"
//! metrics-listen = "127.0.0.1:9464"
//! parent-address = ["10.0.0.1:7000", "10.0.0.2:7000"]
//! ```
//!
//! The file becomes flags placed before the command line's, read from the
//! program's own clap definition, so every flag is covered and a key that
//! is no flag of that command is an error naming it. A flag given on the
//! command line wins over the file; the file wins over the environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{ArgAction, Command};

/// The flag that names the file.
pub const FLAG: &str = "config";

/// The environment variable that names the file when the flag does not.
pub const ENV: &str = "RELAYMESH_CONFIG";

/// `--config FILE`, as the daemons take it: flattened into their
/// top-level arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArg {
    /// Read flags from this TOML file too: its keys are the long flags of
    /// the command run, as `data-dir = "/var/lib/relaymesh"`; a flag on the
    /// command line wins over the file, the file over the environment
    /// (docs/install.md, "Config files").
    #[arg(long = "config", global = true, value_name = "FILE", env = ENV)]
    pub config: Option<PathBuf>,
}

/// Parses the program's arguments with its config file's settings (see
/// [`expand`]), as [`clap::Parser::parse`] does: a config file that cannot
/// be used ends the program as a usage error does (exit code 2).
pub fn parse<P: clap::Parser>() -> P {
    match expand(&P::command(), std::env::args_os().collect()) {
        Ok(args) => P::parse_from(args),
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(2)
        }
    }
}

/// Why a config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("cannot read the config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("the config file {path} is not valid TOML: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// A key names no flag of the command.
    #[error("{path}: `{key}` is no flag of `{command}`; its flags are: {known}")]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// The command run (`relay run`).
        command: String,
        /// Its long flags.
        known: String,
    },
    /// A value has a type the flag cannot take.
    #[error("{path}: `{key}` {problem}")]
    BadValue {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What is wrong with its value.
        problem: String,
    },
}

/// `args` (the program's, its name first) with the settings of the config
/// file they name (`--config FILE`, else `RELAYMESH_CONFIG`) inserted as
/// flags after the subcommand, before the command line's own; `args`
/// unchanged when no file is named.
pub fn expand(command: &Command, args: Vec<OsString>) -> Result<Vec<OsString>, ConfigFileError> {
    let named = named_file(&args).or_else(|| std::env::var_os(ENV).map(PathBuf::from));
    let Some(path) = named else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigFileError::Read {
        path: path.clone(),
        source,
    })?;
    expand_with(command, args, &path, &text)
}

/// [`expand`] with the file's `text` given.
pub fn expand_with(
    command: &Command,
    args: Vec<OsString>,
    path: &Path,
    text: &str,
) -> Result<Vec<OsString>, ConfigFileError> {
    let table: toml::Table =
        text.parse()
            .map_err(|error: toml::de::Error| ConfigFileError::Parse {
                path: path.to_path_buf(),
                reason: error.message().to_string(),
            })?;
    let (chain, insert_at) = subcommand(command, &args);
    let run = chain.last().copied().unwrap_or(command);
    let name = chain
        .iter()
        .map(|command| command.get_name())
        .collect::<Vec<_>>()
        .join(" ");
    let name = if name.is_empty() {
        command.get_name().to_string()
    } else {
        format!("{} {name}", command.get_name())
    };
    let given = |long: &str| {
        args.iter().skip(1).any(|arg| {
            let arg = arg.to_string_lossy();
            arg == format!("--{long}") || arg.starts_with(&format!("--{long}="))
        })
    };
    let mut flags = Vec::new();
    for (key, value) in &table {
        let arg = std::iter::once(run)
            .chain(chain.iter().rev().skip(1).copied())
            .chain(std::iter::once(command))
            .flat_map(Command::get_arguments)
            .find(|arg| arg.get_long() == Some(key.as_str()) && key != FLAG)
            .ok_or_else(|| ConfigFileError::UnknownKey {
                path: path.to_path_buf(),
                key: key.clone(),
                command: name.clone(),
                known: longs(run),
            })?;
        if given(key) {
            continue;
        }
        let bad = |problem: String| ConfigFileError::BadValue {
            path: path.to_path_buf(),
            key: key.clone(),
            problem,
        };
        let takes_many = matches!(arg.get_action(), ArgAction::Append)
            || arg
                .get_num_args()
                .is_some_and(|range| range.max_values() > 1);
        match (arg.get_action(), value) {
            (ArgAction::SetTrue, toml::Value::Boolean(true)) => flags.push(format!("--{key}")),
            (ArgAction::SetTrue, toml::Value::Boolean(false)) => {}
            (ArgAction::SetTrue, _) => return Err(bad("is a switch: true or false".into())),
            (_, toml::Value::Array(values)) if takes_many => {
                for value in values {
                    flags.push(format!("--{key}={}", scalar(value).map_err(&bad)?));
                }
            }
            (_, toml::Value::Array(_)) => {
                return Err(bad("takes one value, not a list".into()));
            }
            (_, value) => flags.push(format!("--{key}={}", scalar(value).map_err(&bad)?)),
        }
    }
    let mut expanded = args;
    let at = insert_at.min(expanded.len());
    expanded.splice(at..at, flags.into_iter().map(OsString::from));
    Ok(expanded)
}

/// The value of `--config FILE` or `--config=FILE` in `args`.
fn named_file(args: &[OsString]) -> Option<PathBuf> {
    let long = format!("--{FLAG}");
    let mut args = args.iter().skip(1);
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == long {
            return args.next().map(PathBuf::from);
        }
        if let Some(path) = text.strip_prefix(&format!("{long}=")) {
            return Some(PathBuf::from(path));
        }
    }
    None
}

/// The subcommands `args` run, outermost first, and the index after the
/// last one's name (where the file's flags go).
fn subcommand<'a>(command: &'a Command, args: &[OsString]) -> (Vec<&'a Command>, usize) {
    let mut chain = Vec::new();
    let mut current = command;
    let mut at = 1;
    let mut index = 1;
    while index < args.len() {
        let text = args[index].to_string_lossy();
        if text == "--" {
            break;
        }
        if let Some(flag) = text.strip_prefix("--") {
            let takes_value = !flag.contains('=')
                && current
                    .get_arguments()
                    .chain(command.get_arguments())
                    .find(|arg| arg.get_long() == Some(flag))
                    .is_some_and(|arg| arg.get_action().takes_values());
            index += if takes_value { 2 } else { 1 };
            continue;
        }
        if let Some(sub) = current.find_subcommand(text.as_ref()) {
            chain.push(sub);
            current = sub;
            at = index + 1;
        }
        index += 1;
    }
    (chain, at)
}

/// A TOML scalar as a flag's value.
fn scalar(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(text) => Ok(text.clone()),
        toml::Value::Integer(number) => Ok(number.to_string()),
        toml::Value::Float(number) => Ok(number.to_string()),
        toml::Value::Boolean(flag) => Ok(flag.to_string()),
        toml::Value::Datetime(time) => Ok(time.to_string()),
        toml::Value::Array(_) | toml::Value::Table(_) => {
            Err("must be a string, a number or a boolean".into())
        }
    }
}

/// The long flags of `command`, for an error.
fn longs(command: &Command) -> String {
    let mut longs: Vec<&str> = command
        .get_arguments()
        .filter_map(|arg| arg.get_long())
        .filter(|long| !matches!(*long, "help" | "version" | FLAG))
        .collect();
    longs.sort_unstable();
    longs.join(", ")
}

#[cfg(test)]
mod tests {
    use clap::{Arg, ArgAction, Command};

    use super::*;

    fn program() -> Command {
        Command::new("relay")
            .arg(Arg::new(FLAG).long(FLAG).global(true))
            .subcommand(
                Command::new("run")
                    .arg(Arg::new("data-dir").long("data-dir").required(true))
                    .arg(
                        Arg::new("parent-address")
                            .long("parent-address")
                            .action(ArgAction::Append),
                    )
                    .arg(
                        Arg::new("verbose")
                            .long("verbose")
                            .action(ArgAction::SetTrue),
                    )
                    .arg(Arg::new("grace").long("grace").default_value("30s")),
            )
            .subcommand(Command::new("init").arg(Arg::new("name").long("name")))
    }

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn expanded(list: &[&str], text: &str) -> Result<Vec<String>, ConfigFileError> {
        let out = expand_with(&program(), args(list), Path::new("relay.toml"), text)?;
        Ok(out
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect())
    }

    #[test]
    fn settings_become_flags_after_the_subcommand() {
        let text = r#"
            data-dir = "/var/lib/relaymesh"
            parent-address = ["a:7000", "b:7000"]
            verbose = true
            grace = 10
        "#;
        let out = expanded(&["relay", "--config", "f", "run"], text).expect("expands");
        assert_eq!(&out[..4], ["relay", "--config", "f", "run"]);
        let mut flags = out[4..].to_vec();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--data-dir=/var/lib/relaymesh",
                "--grace=10",
                "--parent-address=a:7000",
                "--parent-address=b:7000",
                "--verbose",
            ]
        );
        let parsed = program()
            .try_get_matches_from(&out)
            .expect("clap takes them");
        let run = parsed.subcommand_matches("run").expect("run");
        assert_eq!(
            run.get_one::<String>("data-dir").map(String::as_str),
            Some("/var/lib/relaymesh")
        );
    }

    #[test]
    fn the_command_line_wins() {
        let text = "data-dir = \"/from/file\"\nverbose = false\n";
        let out = expanded(&["relay", "run", "--data-dir=/from/cli"], text).expect("expands");
        assert_eq!(out, ["relay", "run", "--data-dir=/from/cli"]);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_errors_naming_them() {
        let unknown = expanded(&["relay", "run"], "data_dir = \"/x\"").expect_err("a typo");
        let message = unknown.to_string();
        assert!(
            message.contains("`data_dir` is no flag of `relay run`"),
            "{message}"
        );
        assert!(message.contains("data-dir"), "{message}");
        // A flag of another subcommand is not one of this one.
        assert!(expanded(&["relay", "run"], "name = \"x\"").is_err());
        let list = expanded(&["relay", "run"], "data-dir = [\"a\", \"b\"]").expect_err("one value");
        assert!(list.to_string().contains("not a list"), "{list}");
        let switch = expanded(&["relay", "run"], "verbose = \"yes\"").expect_err("a switch");
        assert!(switch.to_string().contains("true or false"), "{switch}");
        let broken = expanded(&["relay", "run"], "data-dir = ").expect_err("not TOML");
        assert!(broken.to_string().contains("not valid TOML"), "{broken}");
    }

    #[test]
    fn values_of_other_flags_are_not_taken_for_subcommands() {
        let out = expanded(&["relay", "--config", "run", "init"], "name = \"n\"").expect("init");
        assert_eq!(out, ["relay", "--config", "run", "init", "--name=n"]);
    }
}
