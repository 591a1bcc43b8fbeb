//! Status rules (`Placement.spec.statusRules`): CEL expressions over every
//! object a placement applied on every cluster, aggregated up the tree, in
//! the spirit of KubeStellar's StatusCollector.
//!
//! Three steps, each a pure function:
//!
//! 1. [`parse`] reads and checks the rules at submission, CEL expressions
//!    compiled included, so an invalid one is refused with the field, the
//!    rule and the position in the expression;
//! 2. on each cluster, [`CompiledRules::evaluate`] turns the live objects
//!    into one [`RuleSummary`] per rule, which the tree then merges with
//!    [`merge_rules`](crate::summary::merge_rules);
//! 3. at the root, [`present`] turns a rule's merged summary into what
//!    `Placement.status.rules[]` shows.
//!
//! An expression sees two variables: `object`, the live object as JSON
//! (status included), and `cluster`, `{name, labels}` of the cluster it was
//! applied on. The environment is CEL's standard library (with `matches`);
//! no time types and no extension libraries. Evaluation never fails a
//! rule: an object whose `filter` is not `true`, or whose `select` is not a
//! number (a missing field, a string, an error), is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use cel::{Context, Env, Program};
use relaymesh_protocol::status::{MAX_RULES, MAX_TOP};
use relaymesh_protocol::{RuleSummary, Summary};
use serde_json::{json, Value};

use crate::summary::{average, merge_summaries, single};

/// How many values of a `topk` rule `Placement.status` shows when the rule
/// sets no `limit`.
pub const DEFAULT_LIMIT: usize = 5;

/// How long one expression may be, in bytes: with the bounds below, what
/// bounds the work of evaluating it on every object of every cluster.
/// Kubernetes' own CEL rules are rarely longer than a line.
pub const MAX_EXPRESSION_BYTES: usize = 1024;

/// How deeply brackets may nest in an expression. cel's parser stops near
/// a hundred levels with an error that does not say where; this bound is
/// lower than any stack trouble and says where.
pub const MAX_EXPRESSION_DEPTH: usize = 32;

/// How deeply comprehensions (`all`, `exists`, `exists_one`, `map`,
/// `filter`) may nest. Each level multiplies the work by the length of the
/// list it walks; CEL has no other loops, so two levels bound an
/// evaluation by the square of the object's size, where Kubernetes
/// estimates costs from a schema relaymesh does not have.
pub const MAX_COMPREHENSION_NESTING: usize = 2;

/// One status rule, read and checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StatusRule {
    /// The rule's name: a DNS label, unique within the placement.
    pub name: String,
    /// The CEL expression whose number is aggregated; `None` only for
    /// [`Aggregate::Count`].
    pub select: Option<String>,
    /// A CEL expression an object must make `true` to count.
    pub filter: Option<String>,
    /// How the values combine.
    pub aggregate: Aggregate,
    /// A cluster label key: values are also summarised per value of that
    /// label on the cluster they came from.
    pub group_by: Option<String>,
    /// For [`Aggregate::TopK`], how many values `Placement.status` shows
    /// (1 to [`MAX_TOP`]); [`DEFAULT_LIMIT`] for every other aggregate,
    /// which ignores it.
    pub limit: usize,
}

/// How a rule's values combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Aggregate {
    /// How many objects pass the filter (and have a value, with a select).
    Count,
    /// The sum of the values.
    Sum,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// The average of the values.
    Avg,
    /// The largest values, with the clusters they came from.
    TopK,
}

impl Aggregate {
    /// Every aggregate, in the order the documentation lists them.
    pub const ALL: [Aggregate; 6] = [
        Aggregate::Count,
        Aggregate::Sum,
        Aggregate::Min,
        Aggregate::Max,
        Aggregate::Avg,
        Aggregate::TopK,
    ];

    /// The aggregate's name in `spec.statusRules[].aggregate`.
    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Count => "count",
            Aggregate::Sum => "sum",
            Aggregate::Min => "min",
            Aggregate::Max => "max",
            Aggregate::Avg => "avg",
            Aggregate::TopK => "topk",
        }
    }

    /// The aggregate called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|aggregate| aggregate.name() == name)
    }
}

impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why status rules were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// A field is missing, has the wrong shape, or a value out of range.
    #[error("{field}: {message}")]
    Invalid {
        /// The field's path, as Kubernetes writes it
        /// (`spec.statusRules[1].limit`).
        field: String,
        /// What is wrong, naming the rule when it has a name.
        message: String,
    },
    /// A CEL expression does not compile, or refers to a variable that
    /// does not exist.
    #[error("{field}: rule {rule:?}: {message}")]
    Expression {
        /// The expression's field (`spec.statusRules[1].select`).
        field: String,
        /// The rule's name.
        rule: String,
        /// Where in the expression, 1-based line and column, when the
        /// parser knows.
        position: Option<(usize, usize)>,
        /// What is wrong, with the position (`Syntax error at 1:15: …`).
        message: String,
    },
}

impl RuleError {
    /// The path of the field at fault, as Kubernetes writes it.
    pub fn field(&self) -> &str {
        match self {
            RuleError::Invalid { field, .. } | RuleError::Expression { field, .. } => field,
        }
    }

    /// What is wrong, without the field: the rule, the position and why.
    pub fn message(&self) -> String {
        match self {
            RuleError::Invalid { message, .. } => message.clone(),
            RuleError::Expression { rule, message, .. } => format!("rule {rule:?}: {message}"),
        }
    }
}

/// The path of `spec.statusRules` in a Placement.
const FIELD: &str = "spec.statusRules";

/// The fields a rule may have; any other is refused, so that a misspelt
/// `groupby` is not silently ignored.
const KNOWN_FIELDS: [&str; 6] = ["name", "select", "filter", "aggregate", "groupBy", "limit"];

/// Reads `spec.statusRules` (absent or `null`: no rules) and checks every
/// rule, compiling its expressions, so that what [`CompiledRules::compile`]
/// later gets always compiles.
pub fn parse(rules: Option<&Value>) -> Result<Vec<StatusRule>, RuleError> {
    let items = match rules {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid(FIELD, "must be a list")),
    };
    if items.len() > MAX_RULES {
        return Err(invalid(
            FIELD,
            format!(
                "Too many: {}: must have at most {MAX_RULES} items",
                items.len()
            ),
        ));
    }
    let rules = items
        .iter()
        .enumerate()
        .map(|(index, item)| read_rule(item, &format!("{FIELD}[{index}]")))
        .collect::<Result<Vec<_>, _>>()?;
    CompiledRules::compile(&rules)?;
    Ok(rules)
}

/// Status rules ready to evaluate: expressions compiled once, rules in
/// name order (the order [`RuleSummary`]s travel in).
pub struct CompiledRules {
    env: Arc<Env>,
    rules: Vec<CompiledRule>,
}

struct CompiledRule {
    rule: StatusRule,
    select: Option<Program>,
    filter: Option<Program>,
}

impl fmt::Debug for CompiledRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.rules.iter().map(|compiled| &compiled.rule))
            .finish()
    }
}

impl CompiledRules {
    /// Checks `rules` (as [`parse`] does: names, limits, expressions) and
    /// compiles their expressions. Errors name fields by the rules' indexes
    /// in `rules`.
    pub fn compile(rules: &[StatusRule]) -> Result<Self, RuleError> {
        if rules.len() > MAX_RULES {
            return Err(invalid(
                FIELD,
                format!(
                    "Too many: {}: must have at most {MAX_RULES} items",
                    rules.len()
                ),
            ));
        }
        let env = Arc::new(Env::stdlib());
        let mut names = BTreeSet::new();
        let mut compiled = Vec::with_capacity(rules.len());
        for (index, rule) in rules.iter().enumerate() {
            let path = format!("{FIELD}[{index}]");
            check_rule(rule, &path)?;
            if !names.insert(rule.name.as_str()) {
                return Err(invalid(
                    format!("{path}.name"),
                    format!("Duplicate value: {:?}", rule.name),
                ));
            }
            let program = |field: &str, source: &Option<String>| {
                source
                    .as_deref()
                    .map(|source| expression::compile(&env, source, &rule.name, &path, field))
                    .transpose()
            };
            compiled.push(CompiledRule {
                select: program("select", &rule.select)?,
                filter: program("filter", &rule.filter)?,
                rule: rule.clone(),
            });
        }
        compiled.sort_by(|a, b| a.rule.name.cmp(&b.rule.name));
        Ok(Self {
            env,
            rules: compiled,
        })
    }

    /// The rules, in name order.
    pub fn rules(&self) -> impl ExactSizeIterator<Item = &StatusRule> {
        self.rules.iter().map(|compiled| &compiled.rule)
    }

    /// Whether there are no rules (nothing to evaluate).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// One cluster's summaries: for each rule, in name order, the values of
    /// `objects` (the live objects the placement applied on the cluster)
    /// that pass the rule's filter. Every rule gets a summary, with a count
    /// of 0 when no object has a value. With a `group_by`, the cluster's
    /// value of that label is the group's key; a cluster without the label
    /// is grouped under the empty key `""`, so that every value is in a
    /// group (and a cluster whose label is the empty string joins it).
    pub fn evaluate(
        &self,
        objects: &[Value],
        cluster: &str,
        labels: &BTreeMap<String, String>,
    ) -> Vec<RuleSummary> {
        let mut summaries = vec![Summary::default(); self.rules.len()];
        let cluster_value = expression::cluster_value(cluster, labels);
        for object in objects {
            // Converted once per object, for every rule. Adding a variable
            // cannot panic on what cel_value builds: only JSON's kinds of
            // values, which all convert.
            let mut context = Context::with_env(Arc::clone(&self.env));
            context.add_variable_from_value("object", expression::cel_value(object));
            context.add_variable_from_value("cluster", cluster_value.clone());
            for (compiled, summary) in self.rules.iter().zip(summaries.iter_mut()) {
                if let Some(value) = compiled.value(&context) {
                    // Merged as they come, so memory stays bounded
                    // (MAX_TOP values) whatever the number of objects.
                    *summary = merge_summaries([&*summary, &single(value, cluster)]);
                }
            }
        }
        self.rules
            .iter()
            .zip(summaries)
            .map(|(compiled, all)| {
                let groups = match &compiled.rule.group_by {
                    Some(key) => {
                        let group = labels.get(key).cloned().unwrap_or_default();
                        vec![(group, all.clone())]
                    }
                    None => Vec::new(),
                };
                RuleSummary {
                    rule: compiled.rule.name.clone(),
                    all,
                    groups,
                    other: Summary::default(),
                }
            })
            .collect()
    }
}

impl CompiledRule {
    /// The value `object` (in `context`) contributes to the rule, if any:
    /// the select's number, or 1 per counted object for `count`.
    fn value(&self, context: &Context<'_, '_>) -> Option<f64> {
        if let Some(filter) = &self.filter {
            if !matches!(filter.execute(context), Ok(cel::Value::Bool(true))) {
                return None;
            }
        }
        let selected = match &self.select {
            Some(select) => Some(select.execute(context).ok()?),
            None => None,
        };
        match (self.rule.aggregate, selected) {
            (Aggregate::Count, None) => Some(1.0),
            // Counting what has a value: a null is no value.
            (Aggregate::Count, Some(value)) => (!matches!(value, cel::Value::Null)).then_some(1.0),
            (_, Some(value)) => expression::number(&value),
            (_, None) => None,
        }
    }
}

/// What the root writes into `Placement.status.rules[]` for `rule`, given
/// its merged summary:
///
/// ```json
/// {"name": "ready", "aggregate": "sum", "value": 17, "count": 20,
///  "groups": [{"key": "eu", "value": 9, "count": 10}],
///  "other": {"value": 8, "count": 10}}
/// ```
///
/// `value` is, per aggregate: the count; the sum; the smallest or largest
/// value (`null` with none); the average (`null` with none). A `topk` rule
/// has no `value` but `top`, the largest values with their clusters, at
/// most the rule's `limit`. `groups` is there for a rule with a `groupBy`,
/// `other` only when some groups were folded into it. Integral numbers are
/// written as JSON integers, so `kubectl get -o yaml` shows `17`.
pub fn present(rule: &StatusRule, summary: &RuleSummary) -> Value {
    let mut presented = serde_json::Map::new();
    presented.insert("name".into(), Value::from(rule.name.as_str()));
    presented.insert("aggregate".into(), Value::from(rule.aggregate.name()));
    presented.extend(present_values(rule, &summary.all));
    if rule.group_by.is_some() {
        let groups = summary
            .groups
            .iter()
            .map(|(key, summary)| {
                let mut group = serde_json::Map::new();
                group.insert("key".into(), Value::from(key.as_str()));
                group.extend(present_values(rule, summary));
                Value::Object(group)
            })
            .collect();
        presented.insert("groups".into(), Value::Array(groups));
    }
    if summary.other.count > 0 {
        presented.insert(
            "other".into(),
            Value::Object(present_values(rule, &summary.other)),
        );
    }
    Value::Object(presented)
}

/// The value (or the top list) and the count of one summary.
fn present_values(rule: &StatusRule, summary: &Summary) -> serde_json::Map<String, Value> {
    let mut presented = serde_json::Map::new();
    let value = match rule.aggregate {
        Aggregate::Count => Some(Value::from(summary.count)),
        Aggregate::Sum => Some(json_number(summary.sum.0)),
        Aggregate::Min => Some(summary.min.map_or(Value::Null, |min| json_number(min.0))),
        Aggregate::Max => Some(summary.max.map_or(Value::Null, |max| json_number(max.0))),
        Aggregate::Avg => Some(average(summary).map_or(Value::Null, json_number)),
        Aggregate::TopK => None,
    };
    if let Some(value) = value {
        presented.insert("value".into(), value);
    }
    presented.insert("count".into(), Value::from(summary.count));
    if rule.aggregate == Aggregate::TopK {
        let top = summary
            .top
            .iter()
            .take(rule.limit.clamp(1, MAX_TOP))
            .map(|ranked| json!({"cluster": ranked.cluster, "value": json_number(ranked.value.0)}))
            .collect();
        presented.insert("top".into(), Value::Array(top));
    }
    presented
}

/// `value` as a JSON number: an integer when it is one (and exactly
/// representable), so YAML shows `17`, not `17.0`; `null` if not finite.
pub fn json_number(value: f64) -> Value {
    // 2^53: past it, not every integer is a double, and the i64 would claim
    // a precision the value does not have.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if value.fract() == 0.0 && value.abs() <= EXACT {
        // The cast is exact: integral and within ±2^53.
        Value::from(value as i64)
    } else {
        serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

fn read_rule(item: &Value, path: &str) -> Result<StatusRule, RuleError> {
    let Value::Object(fields) = item else {
        return Err(invalid(path, "must be an object"));
    };
    let name = match fields.get("name") {
        Some(Value::String(name)) => name.clone(),
        None | Some(Value::Null) => return Err(invalid(format!("{path}.name"), "Required value")),
        Some(_) => return Err(invalid(format!("{path}.name"), "must be a string")),
    };
    // From here on, every message names the rule.
    let named = |field: &str, message: &str| {
        invalid(
            format!("{path}.{field}"),
            format!("rule {name:?}: {message}"),
        )
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !KNOWN_FIELDS.contains(&key.as_str()))
    {
        return Err(named(unknown, "unknown field"));
    }
    let text = |field: &str| match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(named(field, "must be a string")),
    };
    let aggregate = match fields.get("aggregate") {
        None | Some(Value::Null) => return Err(named("aggregate", "Required value")),
        Some(Value::String(aggregate)) => Aggregate::from_name(aggregate).ok_or_else(|| {
            named(
                "aggregate",
                &format!(
                    "Unsupported value: {aggregate:?}: supported values: {}",
                    supported_aggregates()
                ),
            )
        })?,
        Some(_) => return Err(named("aggregate", "must be a string")),
    };
    let limit = match fields.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(limit) => limit
            .as_u64()
            .and_then(|limit| usize::try_from(limit).ok())
            .ok_or_else(|| named("limit", "must be a positive integer"))?,
    };
    if fields.get("limit").is_some_and(|limit| !limit.is_null()) && aggregate != Aggregate::TopK {
        return Err(named("limit", "Forbidden: only for aggregate \"topk\""));
    }
    Ok(StatusRule {
        select: text("select")?,
        filter: text("filter")?,
        group_by: text("groupBy")?,
        name,
        aggregate,
        limit,
    })
}

/// The checks that need no parsing: what a [`StatusRule`] built in code
/// must also pass.
fn check_rule(rule: &StatusRule, path: &str) -> Result<(), RuleError> {
    if let Err(error) = relaymesh_protocol::name::validate(&rule.name) {
        return Err(invalid(
            format!("{path}.name"),
            format!("Invalid value: {:?}: {error}", rule.name),
        ));
    }
    let named = |field: &str, message: String| {
        invalid(
            format!("{path}.{field}"),
            format!("rule {:?}: {message}", rule.name),
        )
    };
    if rule.select.is_none() && rule.aggregate != Aggregate::Count {
        return Err(named(
            "select",
            format!(
                "Required value: aggregate {:?} needs a value",
                rule.aggregate.name()
            ),
        ));
    }
    if let Some(key) = &rule.group_by {
        if !crate::selector::valid_key(key) {
            return Err(named(
                "groupBy",
                format!("Invalid value: {key:?}: must be a label key"),
            ));
        }
    }
    if rule.aggregate == Aggregate::TopK && !(1..=MAX_TOP).contains(&rule.limit) {
        return Err(named(
            "limit",
            format!(
                "Invalid value: {}: must be between 1 and {MAX_TOP}",
                rule.limit
            ),
        ));
    }
    Ok(())
}

fn supported_aggregates() -> String {
    Aggregate::ALL
        .iter()
        .map(|aggregate| format!("{:?}", aggregate.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> RuleError {
    RuleError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

mod expression;
#[cfg(test)]
mod tests;
