//! Log setup shared by the daemons (`relay`, `edge-agent`): structured logs
//! on stderr, filtered by `RUST_LOG`, as text or one JSON object per line.
//!
//! A JSON line names the node and its role at the top level (`"node"`,
//! `"role"`), so a log collector reading many nodes' lines can tell them
//! apart without digging into spans. Every line is one JSON object with
//! unique keys: tracing-subscriber's own JSON format writes a span's name
//! and its fields side by side (`{"name":"relay","name":"x1"}` for a field
//! called `name`), which most parsers read as the last key only.

use std::sync::OnceLock;

use relaymesh_protocol::Role;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colored on a terminal).
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The node's name, once the process knows it (from `--name` or its store).
static NODE: OnceLock<String> = OnceLock::new();

/// Installs the global subscriber for a process running a node of `role`.
/// `RUST_LOG` overrides `default_filter`.
pub fn init(format: LogFormat, default_filter: &str, role: Role) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines { role })
            .init(),
    }
}

/// Names the node this process runs: every JSON line from now on carries
/// it as `"node"`. A process runs one node, so only the first name given
/// counts.
pub fn set_node(name: &str) {
    // A second call names the same node again; nothing to change.
    let _ = NODE.set(name.to_string());
}

/// Writes each event as one JSON object: `timestamp`, `level`, `node` (once
/// known), `role`, `fields` (the event's, `message` included), `target`,
/// and, inside spans, `span` (the innermost) and `spans` (root first), each
/// `{"name": SPAN, FIELD: VALUE, …}`.
struct JsonLines {
    role: Role,
}

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let metadata = event.metadata();
        let mut fields = FieldValues::default();
        event.record(&mut fields);
        let spans: Vec<Value> = context
            .event_scope()
            .into_iter()
            .flat_map(|scope| scope.from_root())
            .map(|span| {
                let extensions = span.extensions();
                let fields = extensions
                    .get::<FormattedFields<JsonFields>>()
                    .map(|formatted| formatted.fields.as_str())
                    .unwrap_or_default();
                Value::Object(span_object(span.name(), fields))
            })
            .collect();
        let line = Line {
            timestamp: humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
            level: metadata.level().as_str(),
            node: NODE.get().map(String::as_str),
            role: self.role.as_str(),
            fields: fields.0,
            target: metadata.target(),
            span: spans.last(),
            spans: &spans,
        };
        let text = serde_json::to_string(&line).map_err(|_| std::fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// One JSON line, its keys in this order; maps (fields, spans) cannot
/// hold a key twice, so neither can the line.
#[derive(serde::Serialize)]
struct Line<'a> {
    timestamp: String,
    level: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    role: &'a str,
    fields: Map<String, Value>,
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    span: Option<&'a Value>,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    spans: &'a [Value],
}

/// A span as a JSON object: its name, then its fields (as `JsonFields`
/// wrote them); a field called `name` is kept as `field.name`.
fn span_object(name: &str, fields: &str) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("name".into(), name.into());
    let fields: Map<String, Value> = serde_json::from_str(fields).unwrap_or_default();
    for (key, value) in fields {
        let key = if object.contains_key(&key) {
            format!("field.{key}")
        } else {
            key
        };
        object.insert(key, value);
    }
    object
}

/// An event's fields as JSON values: numbers and booleans as themselves,
/// the rest as their text.
#[derive(Default)]
struct FieldValues(Map<String, Value>);

impl Visit for FieldValues {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_field_called_name_does_not_repeat_the_key() {
        let object = span_object("relay", r#"{"name":"x1","remote":"127.0.0.1:1"}"#);
        let text = serde_json::to_string(&object).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"field.name":"x1","name":"relay","remote":"127.0.0.1:1"}"#
        );
    }
}
