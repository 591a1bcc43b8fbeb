//! Compiling and checking one status rule's CEL expression, and the values
//! expressions see: a rule's expression is refused at submission when it
//! does not parse, is too large or too deep, or names a variable that does
//! not exist, with the position in the expression.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::objects::{Key, Map};
use cel::{Env, ParseErrors, Program};
use serde_json::{json, Value};

use super::{RuleError, MAX_COMPREHENSION_NESTING, MAX_EXPRESSION_BYTES, MAX_EXPRESSION_DEPTH};

/// Compiles one expression of rule `rule` at `path.field`, checking its
/// size, its nesting and its variables.
pub(super) fn compile(
    env: &Env,
    source: &str,
    rule: &str,
    path: &str,
    field: &str,
) -> Result<Program, RuleError> {
    let error = |position: Option<(usize, usize)>, message: String| RuleError::Expression {
        field: format!("{path}.{field}"),
        rule: rule.to_string(),
        position,
        message,
    };
    if source.trim().is_empty() {
        return Err(error(None, "Required value: an expression".into()));
    }
    if source.len() > MAX_EXPRESSION_BYTES {
        return Err(error(
            None,
            format!(
                "Too long: {} bytes: may have at most {MAX_EXPRESSION_BYTES}",
                source.len()
            ),
        ));
    }
    // Before parsing, so that the message says where (cel's own limit does
    // not).
    if let Some(position) = too_deep(source) {
        return Err(error(
            Some(position),
            format!(
                "Too deep at {}:{}: may nest at most {MAX_EXPRESSION_DEPTH} levels",
                position.0, position.1
            ),
        ));
    }
    let program = env
        .compile(source)
        .map_err(|errors| parse_error(&errors, error))?;
    if let Some(problem) = check_tree(program.expression(), &mut vec!["object", "cluster"], 0) {
        let (node, kind, detail) = match problem {
            Problem::Undeclared(node, name) => (
                node,
                "Undeclared reference",
                format!("{name:?}: the variables are \"object\" and \"cluster\""),
            ),
            Problem::Nested(node) => (
                node,
                "Too deep",
                format!("comprehensions may nest at most {MAX_COMPREHENSION_NESTING} levels"),
            ),
        };
        let position = program
            .source_info()
            .offset_for(node.id)
            .and_then(|(start, _)| line_and_column(source, start as usize));
        let at = position.map_or(String::new(), |(line, column)| {
            format!(" at {line}:{column}")
        });
        return Err(error(position, format!("{kind}{at}: {detail}")));
    }
    Ok(program)
}

/// The first of cel's parse errors, with its position, and how many more
/// there are.
fn parse_error(
    errors: &ParseErrors,
    error: impl Fn(Option<(usize, usize)>, String) -> RuleError,
) -> RuleError {
    let Some(first) = errors.errors.first() else {
        return error(None, "Syntax error".into());
    };
    // cel writes (0, 0) when it does not know where.
    let position = match first.pos {
        (line, column) if line > 0 && column > 0 => {
            Some((line.unsigned_abs(), column.unsigned_abs()))
        }
        _ => None,
    };
    let (kind, detail) = match first.msg.strip_prefix("Syntax error: ") {
        Some(detail) => ("Syntax error", detail),
        None => ("Invalid expression", first.msg.as_str()),
    };
    let at = position.map_or(String::new(), |(line, column)| {
        format!(" at {line}:{column}")
    });
    let more = match errors.errors.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    error(position, format!("{kind}{at}: {detail}{more}"))
}

/// The 1-based line and column where `source` first nests deeper than
/// [`MAX_EXPRESSION_DEPTH`] brackets, outside string literals. Triple-quoted
/// and raw strings are scanned as plain ones: at worst a bracket inside
/// one counts, which matters only past the bound.
fn too_deep(source: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let (mut line, mut column) = (1, 0);
    for c in source.chars() {
        column += 1;
        if c == '\n' {
            (line, column) = (line + 1, 0);
        }
        if let Some(open) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == open => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_EXPRESSION_DEPTH {
                    return Some((line, column));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Names CEL knows without a declaration: its type identifiers.
const TYPE_NAMES: [&str; 11] = [
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

/// What [`check_tree`] finds wrong with a compiled expression.
enum Problem<'a> {
    /// An identifier that is neither a variable of the rules, nor bound by
    /// an enclosing comprehension (`exists(c, …)`), nor a type name: a typo
    /// such as `obj.status` would otherwise make every object skip,
    /// silently.
    Undeclared(&'a IdedExpr, &'a str),
    /// A comprehension nested deeper than [`MAX_COMPREHENSION_NESTING`].
    Nested(&'a IdedExpr),
}

/// The first problem of `expression`, within `comprehensions` enclosing
/// comprehensions whose variables (and the rules') are `bound`.
fn check_tree<'a>(
    expression: &'a IdedExpr,
    bound: &mut Vec<&'a str>,
    comprehensions: usize,
) -> Option<Problem<'a>> {
    let check =
        |child: &'a IdedExpr, bound: &mut Vec<&'a str>| check_tree(child, bound, comprehensions);
    match &expression.expr {
        Expr::Ident(name) => {
            let known = bound.contains(&name.as_str())
                || TYPE_NAMES.contains(&name.as_str())
                // The parser's own accumulator names (`@result`, `@it`).
                || name.starts_with('@');
            (!known).then_some(Problem::Undeclared(expression, name))
        }
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .find_map(|argument| check(argument, bound)),
        Expr::Comprehension(comprehension) => {
            if comprehensions >= MAX_COMPREHENSION_NESTING {
                return Some(Problem::Nested(expression));
            }
            let found = check(&comprehension.iter_range, bound)
                .or_else(|| check(&comprehension.accu_init, bound));
            if found.is_some() {
                return found;
            }
            let outer = bound.len();
            bound.push(&comprehension.iter_var);
            if let Some(second) = &comprehension.iter_var2 {
                bound.push(second);
            }
            bound.push(&comprehension.accu_var);
            let found = [
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ]
            .into_iter()
            .find_map(|part| check_tree(part, bound, comprehensions + 1));
            bound.truncate(outer);
            found
        }
        Expr::List(list) => list
            .elements
            .iter()
            .find_map(|element| check(element, bound)),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => {
                check(&entry.key, bound).or_else(|| check(&entry.value, bound))
            }
            EntryExpr::StructField(field) => check(&field.value, bound),
        }),
        Expr::Select(select) => check(&select.operand, bound),
        // Struct literals name message types, which the rules' environment
        // has none of: evaluation fails on them, as on any other error.
        Expr::Struct(_) | Expr::Literal(_) | Expr::Unspecified => None,
    }
}

/// The 1-based line and column (in characters) of byte `offset` of
/// `source`, as cel's source offsets count.
pub(super) fn line_and_column(source: &str, offset: usize) -> Option<(usize, usize)> {
    let before = source.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let column = before.chars().rev().take_while(|c| *c != '\n').count() + 1;
    Some((line, column))
}

/// A JSON value as CEL sees it. Integers stay integers (`int`, or `uint`
/// past `i64`), so `object.spec.replicas == 3` holds; other numbers are
/// `double`.
pub(super) fn cel_value(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(value) => cel::Value::Bool(*value),
        Value::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(int), _) => cel::Value::Int(int),
            (None, Some(uint)) => cel::Value::UInt(uint),
            // serde_json's only other numbers are finite doubles.
            (None, None) => cel::Value::Float(number.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(text) => cel::Value::String(Arc::new(text.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(cel_value).collect())),
        Value::Object(fields) => cel::Value::Map(Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(key, value)| (Key::String(Arc::new(key.clone())), cel_value(value)))
                    .collect(),
            ),
        }),
    }
}

/// `cluster` as CEL sees it: `{name, labels}`.
pub(super) fn cluster_value(name: &str, labels: &BTreeMap<String, String>) -> cel::Value {
    let labels = labels
        .iter()
        .map(|(key, value)| (key.clone(), Value::from(value.as_str())))
        .collect();
    cel_value(&json!({"name": name, "labels": Value::Object(labels)}))
}

/// A CEL number as an `f64`: `int`, `uint` and `double`; nothing else.
pub(super) fn number(value: &cel::Value) -> Option<f64> {
    match value {
        // Rounds past 2^53, as any double does: summaries are doubles.
        cel::Value::Int(int) => Some(*int as f64),
        cel::Value::UInt(uint) => Some(*uint as f64),
        cel::Value::Float(float) => Some(*float),
        _ => None,
    }
}
