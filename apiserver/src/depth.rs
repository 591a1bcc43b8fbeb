//! The one nesting limit of the API: no request body, patch result or stored
//! object may nest maps and lists more than [`MAX_DEPTH`] levels deep.
//!
//! Why: serde_json refuses to read a document nested more than 128 levels,
//! so an object built deeper (a JSON patch adds one level per operation)
//! would be stored and then never read back. And a YAML parser's cost can
//! grow with the square of the nesting. Holding every decode and every
//! write to 64 levels keeps what is stored readable by the decoder that
//! accepted it, and keeps the cost of a request linear in its size.
//!
//! Depth counts containers: `{}` is 1, `{"a": []}` is 2; scalars add
//! nothing. One exception: each `metadata.managedFields[].fieldsV1` is
//! counted from its own root, because the server writes it as a mirror of
//! the object's fields four levels down; a stored object is then at most
//! `MAX_DEPTH + 4` deep, far below serde_json's 128.
//!
//! Both checks here are loops over an explicit stack, never recursion, so
//! an input of any depth cannot overflow the stack: [`check_json`] scans
//! raw JSON bytes before they are parsed (one pass, linear), and
//! [`check_value`] walks a decoded value (YAML, protobuf, patch results,
//! objects at the store's boundary).

use serde_json::Value;

/// The deepest nesting of maps and lists the API accepts.
pub const MAX_DEPTH: usize = 64;

/// The longest path a refusal names; longer ones end in `...`.
const MAX_PATH_CHARS: usize = 200;

/// The longest map key a path shows in full.
const MAX_KEY_CHARS: usize = 40;

/// A document nests deeper than [`MAX_DEPTH`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: Invalid value: the object is nested more than {MAX_DEPTH} levels deep")]
pub struct TooDeep {
    /// Where the limit was hit, as `.spec.x[0].y`, cut short when long.
    pub path: String,
}

/// Where a container sits in its parent.
#[derive(Debug, Clone, PartialEq)]
enum Position {
    /// Under a map key.
    Key(String),
    /// At a list index.
    Index(usize),
}

/// Refuses raw JSON `bytes` that nest deeper than [`MAX_DEPTH`], before
/// they are parsed. Does not validate the JSON (the parser does); bytes
/// that are not JSON are scanned all the same, in one pass.
pub fn check_json(bytes: &[u8]) -> Result<(), TooDeep> {
    struct Frame {
        is_map: bool,
        depth: usize,
        /// The position of the child being read.
        child: Position,
        expects_key: bool,
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut key: Option<Vec<u8>> = None;
    for &byte in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
                if let (Some(text), Some(top)) = (key.take(), stack.last_mut()) {
                    top.child = Position::Key(String::from_utf8_lossy(&text).into_owned());
                }
                continue;
            }
            if let Some(text) = key.as_mut() {
                if text.len() < MAX_KEY_CHARS * 4 {
                    text.push(byte);
                }
            }
            continue;
        }
        match byte {
            b'"' => {
                in_string = true;
                if stack
                    .last()
                    .is_some_and(|top| top.is_map && top.expects_key)
                {
                    key = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                let positions: Vec<&Position> = stack.iter().map(|frame| &frame.child).collect();
                let depth = match stack.last() {
                    None => 1,
                    Some(_) if is_fields_v1(&positions) => 1,
                    Some(top) => top.depth + 1,
                };
                if depth > MAX_DEPTH {
                    return Err(TooDeep {
                        path: render(positions.into_iter()),
                    });
                }
                let is_map = byte == b'{';
                stack.push(Frame {
                    is_map,
                    depth,
                    child: if is_map {
                        Position::Key(String::new())
                    } else {
                        Position::Index(0)
                    },
                    expects_key: is_map,
                });
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(top) = stack.last_mut() {
                    match &mut top.child {
                        Position::Index(index) => *index += 1,
                        _ => top.expects_key = top.is_map,
                    }
                }
            }
            b':' => {
                if let Some(top) = stack.last_mut() {
                    top.expects_key = false;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Refuses a decoded `value` that nests deeper than [`MAX_DEPTH`].
pub fn check_value(value: &Value) -> Result<(), TooDeep> {
    // Each entry: a container, its depth, and the path to it.
    let mut stack: Vec<(&Value, usize, Vec<Position>)> = vec![(value, 1, Vec::new())];
    while let Some((value, depth, path)) = stack.pop() {
        let children: Vec<(Position, &Value)> = match value {
            Value::Object(fields) => fields
                .iter()
                .map(|(key, child)| (Position::Key(key.clone()), child))
                .collect(),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(index, child)| (Position::Index(index), child))
                .collect(),
            _ => continue,
        };
        if depth > MAX_DEPTH {
            return Err(TooDeep {
                path: render(path.iter()),
            });
        }
        for (position, child) in children {
            if !(child.is_object() || child.is_array()) {
                continue;
            }
            let mut child_path = path.clone();
            child_path.push(position);
            let positions: Vec<&Position> = child_path.iter().collect();
            let child_depth = if is_fields_v1(&positions) {
                1
            } else {
                depth + 1
            };
            stack.push((child, child_depth, child_path));
        }
    }
    Ok(())
}

/// Whether a container at `positions` (the position in each enclosing
/// container, outermost first) is a `metadata.managedFields[i].fieldsV1`.
fn is_fields_v1(positions: &[&Position]) -> bool {
    matches!(
        positions,
        [Position::Key(metadata), Position::Key(managed), Position::Index(_), Position::Key(fields)]
            if metadata == "metadata" && managed == "managedFields" && fields == "fieldsV1"
    )
}

/// A path as kube-apiserver words field paths, `.spec.x[0]`, cut short.
fn render<'a>(positions: impl Iterator<Item = &'a Position>) -> String {
    let mut path = String::new();
    for position in positions {
        match position {
            Position::Key(key) => {
                path.push('.');
                path.extend(key.chars().take(MAX_KEY_CHARS));
            }
            Position::Index(index) => path.push_str(&format!("[{index}]")),
        }
        if path.chars().count() > MAX_PATH_CHARS {
            let cut: String = path.chars().take(MAX_PATH_CHARS).collect();
            return format!("{cut}...");
        }
    }
    if path.is_empty() {
        path.push('.');
    }
    path
}

#[cfg(test)]
mod tests;
