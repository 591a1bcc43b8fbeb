use proptest::prelude::*;
use serde_json::json;

use super::expression::line_and_column;
use super::*;
use crate::summary::merge_rules;

fn deployment(name: &str, ready: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"replicas": 3},
        "status": {"readyReplicas": ready, "conditions": [{"type": "Available", "status": "True"}]},
    })
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

fn rule(name: &str, aggregate: Aggregate, select: Option<&str>) -> StatusRule {
    StatusRule {
        name: name.into(),
        select: select.map(str::to_string),
        filter: None,
        aggregate,
        group_by: None,
        limit: DEFAULT_LIMIT,
    }
}

fn compiled(rules: &[StatusRule]) -> CompiledRules {
    CompiledRules::compile(rules).expect("valid rules")
}

fn refused(rules: Value) -> RuleError {
    match parse(Some(&rules)) {
        Err(error) => error,
        Ok(parsed) => panic!("{rules}: expected an error, got {parsed:?}"),
    }
}

#[test]
fn reads_the_contract() {
    assert_eq!(parse(None), Ok(Vec::new()));
    assert_eq!(parse(Some(&Value::Null)), Ok(Vec::new()));
    let rules = parse(Some(&json!([
        {"name": "ready", "select": "object.status.readyReplicas",
         "filter": "object.kind == 'Deployment'", "aggregate": "sum", "groupBy": "region"},
        {"name": "objects", "aggregate": "count"},
        {"name": "largest", "select": "object.status.readyReplicas", "aggregate": "topk", "limit": 3},
        {"name": "slowest", "select": "object.spec.replicas", "aggregate": "avg", "limit": null},
    ])))
    .expect("valid");
    assert_eq!(
        rules[0],
        StatusRule {
            name: "ready".into(),
            select: Some("object.status.readyReplicas".into()),
            filter: Some("object.kind == 'Deployment'".into()),
            aggregate: Aggregate::Sum,
            group_by: Some("region".into()),
            limit: DEFAULT_LIMIT,
        }
    );
    assert_eq!(rules[1].aggregate, Aggregate::Count);
    assert_eq!(rules[1].select, None);
    assert_eq!(rules[2].limit, 3);
    assert_eq!(rules[3].limit, DEFAULT_LIMIT);
    for aggregate in Aggregate::ALL {
        assert_eq!(Aggregate::from_name(aggregate.name()), Some(aggregate));
    }
}

#[test]
fn a_syntax_error_names_the_field_the_rule_and_the_position() {
    let error = refused(json!([
        {"name": "objects", "aggregate": "count"},
        {"name": "ready", "select": "object.status.", "aggregate": "sum"},
    ]));
    assert_eq!(error.field(), "spec.statusRules[1].select");
    assert!(
        matches!(&error, RuleError::Expression { rule, position: Some((1, 15)), .. } if rule == "ready"),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with("spec.statusRules[1].select: rule \"ready\": Syntax error at 1:15: "),
        "{text}"
    );
    assert_eq!(format!("{}: {}", error.field(), error.message()), text);
}

#[test]
fn refuses_invalid_rules_naming_the_field_and_the_rule() {
    let too_many: Vec<Value> = (0..=MAX_RULES)
        .map(|n| json!({"name": format!("r{n}"), "aggregate": "count"}))
        .collect();
    let long = format!("object.a + {}", "1 + ".repeat(MAX_EXPRESSION_BYTES / 4));
    let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    let cases = [
        (json!({}), "spec.statusRules", "must be a list"),
        (json!(too_many), "spec.statusRules", "Too many: 17"),
        (json!([3]), "spec.statusRules[0]", "must be an object"),
        (json!([{"aggregate": "count"}]), "spec.statusRules[0].name", "Required value"),
        (json!([{"name": "Ready", "aggregate": "count"}]), "spec.statusRules[0].name", "Invalid value: \"Ready\""),
        (
            json!([{"name": "a", "aggregate": "count"}, {"name": "a", "aggregate": "count"}]),
            "spec.statusRules[1].name",
            "Duplicate value: \"a\"",
        ),
        (json!([{"name": "a", "aggregate": "count", "groupby": "x"}]), "spec.statusRules[0].groupby", "rule \"a\": unknown field"),
        (json!([{"name": "a"}]), "spec.statusRules[0].aggregate", "rule \"a\": Required value"),
        (
            json!([{"name": "a", "aggregate": "median", "select": "1"}]),
            "spec.statusRules[0].aggregate",
            "rule \"a\": Unsupported value: \"median\": supported values: \"count\", \"sum\"",
        ),
        (json!([{"name": "a", "aggregate": "sum"}]), "spec.statusRules[0].select", "rule \"a\": Required value"),
        (json!([{"name": "a", "aggregate": "sum", "select": 3}]), "spec.statusRules[0].select", "must be a string"),
        (
            json!([{"name": "a", "aggregate": "sum", "select": "1", "limit": 3}]),
            "spec.statusRules[0].limit",
            "Forbidden: only for aggregate \"topk\"",
        ),
        (json!([{"name": "a", "aggregate": "topk", "select": "1", "limit": 0}]), "spec.statusRules[0].limit", "between 1 and 10"),
        (json!([{"name": "a", "aggregate": "topk", "select": "1", "limit": 11}]), "spec.statusRules[0].limit", "between 1 and 10"),
        (json!([{"name": "a", "aggregate": "topk", "select": "1", "limit": -1}]), "spec.statusRules[0].limit", "positive integer"),
        (json!([{"name": "a", "aggregate": "count", "groupBy": "no spaces"}]), "spec.statusRules[0].groupBy", "must be a label key"),
        (json!([{"name": "a", "aggregate": "count", "filter": " "}]), "spec.statusRules[0].filter", "rule \"a\": Required value"),
        (json!([{"name": "a", "aggregate": "count", "filter": "1 +"}]), "spec.statusRules[0].filter", "rule \"a\": Syntax error at 1:4: "),
        (
            json!([{"name": "a", "aggregate": "sum", "select": "obj.status.replicas"}]),
            "spec.statusRules[0].select",
            "rule \"a\": Undeclared reference at 1:1: \"obj\": the variables are \"object\" and \"cluster\"",
        ),
        (
            json!([{"name": "a", "aggregate": "sum", "select": "object.spec.replicas +\n  replicas"}]),
            "spec.statusRules[0].select",
            "Undeclared reference at 2:3: \"replicas\"",
        ),
        (
            json!([{"name": "a", "aggregate": "count", "filter": "object.items.exists(x, y > 1)"}]),
            "spec.statusRules[0].filter",
            "Undeclared reference at 1:24: \"y\"",
        ),
        (json!([{"name": "a", "aggregate": "sum", "select": long}]), "spec.statusRules[0].select", "Too long"),
        (json!([{"name": "a", "aggregate": "sum", "select": deep}]), "spec.statusRules[0].select", "Too deep at 1:33: "),
        (
            json!([{"name": "a", "aggregate": "count",
                    "filter": "object.a.all(x, object.b.all(y, object.c.exists(z, x == y && y == z)))"}]),
            "spec.statusRules[0].filter",
            "Too deep",
        ),
    ];
    for (rules, field, message) in cases {
        let error = refused(rules.clone());
        assert_eq!(error.field(), field, "{rules}: {error}");
        assert!(
            error.message().contains(message),
            "{rules}: {:?} does not contain {message:?}",
            error.message()
        );
    }
}

#[test]
fn comprehension_variables_type_names_and_cluster_are_declared() {
    let rules = json!([
        {"name": "a", "aggregate": "count",
         "filter": "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')"},
        {"name": "b", "aggregate": "sum", "select": "double(size(object.metadata.name))",
         "filter": "type(object.spec.replicas) == int && cluster.labels.region in ['eu', 'us']"},
        {"name": "c", "aggregate": "count", "filter": "object.a.all(x, object.b.exists(y, x == y))"},
        {"name": "d", "aggregate": "count", "filter": "object.metadata.name.matches('^web-[0-9]+$')"},
        // Brackets in strings do not nest.
        {"name": "e", "aggregate": "count", "filter": format!("object.kind != '{}'", "(".repeat(40))},
    ]);
    assert_eq!(parse(Some(&rules)).map(|rules| rules.len()), Ok(5));
}

#[test]
fn compile_checks_rules_built_in_code_too() {
    let error = CompiledRules::compile(&[rule("a", Aggregate::Sum, None)]).expect_err("no select");
    assert_eq!(error.field(), "spec.statusRules[0].select");
    let mut top = rule("a", Aggregate::TopK, Some("1"));
    top.limit = MAX_TOP + 1;
    let error = CompiledRules::compile(&[top]).expect_err("limit");
    assert_eq!(error.field(), "spec.statusRules[0].limit");
    fn shareable<T: Send + Sync>() {}
    shareable::<CompiledRules>();
}

fn ready_objects() -> Vec<Value> {
    vec![
        deployment("web", json!(3)),
        deployment("api", json!(1.5)),
        deployment("db", json!(0)),
        // Not a number, or no value at all: skipped.
        deployment("cache", json!("3")),
        json!({"kind": "Deployment", "metadata": {"name": "new"}}),
        config_map("settings"),
    ]
}

#[test]
fn each_aggregate_over_a_few_objects() {
    let select = Some("object.status.readyReplicas");
    let rules = compiled(&[
        rule("sum", Aggregate::Sum, select),
        rule("min", Aggregate::Min, select),
        rule("max", Aggregate::Max, select),
        rule("avg", Aggregate::Avg, select),
        rule("top", Aggregate::TopK, select),
        rule("count", Aggregate::Count, None),
        rule("counted", Aggregate::Count, select),
    ]);
    let summaries = rules.evaluate(&ready_objects(), "edge-1", &BTreeMap::new());
    let names: Vec<&str> = summaries.iter().map(|s| s.rule.as_str()).collect();
    assert_eq!(
        names,
        ["avg", "count", "counted", "max", "min", "sum", "top"],
        "sorted by name, as merge_rules keeps them"
    );
    let by_name: BTreeMap<&str, &RuleSummary> =
        summaries.iter().map(|s| (s.rule.as_str(), s)).collect();
    let sum = &by_name["sum"].all;
    assert_eq!((sum.count, sum.sum.0), (3, 4.5));
    assert_eq!(sum.min.map(|n| n.0), Some(0.0));
    assert_eq!(sum.max.map(|n| n.0), Some(3.0));
    assert_eq!(
        by_name["count"].all.count, 6,
        "every object, without a filter"
    );
    assert_eq!(
        by_name["counted"].all.count, 4,
        "objects whose select has a value, numbers or not"
    );
    let top = &by_name["top"].all.top;
    assert_eq!(top.len(), 3);
    assert_eq!((top[0].value.0, top[0].cluster.as_str()), (3.0, "edge-1"));
    for summary in &summaries {
        assert!(summary.groups.is_empty());
        assert_eq!(summary.other, Summary::default());
    }
}

#[test]
fn the_filter_must_be_true() {
    let mut deployments = rule("ready", Aggregate::Sum, Some("object.status.readyReplicas"));
    deployments.filter =
        Some("object.kind == 'Deployment' && object.status.readyReplicas > 0".into());
    // Not a bool, and an error (no such key): the object is skipped.
    let mut not_bool = rule("not-bool", Aggregate::Count, None);
    not_bool.filter = Some("object.metadata.name".into());
    let mut error = rule("error", Aggregate::Count, None);
    error.filter = Some("object.status.readyReplicas > 0".into());
    let mut clusters = rule("eu", Aggregate::Count, None);
    clusters.filter = Some("cluster.labels.region == 'eu' && cluster.name == 'edge-1'".into());
    let mut named = rule("web", Aggregate::Count, None);
    named.filter = Some("object.metadata.name.matches('^w.b$')".into());
    let rules = compiled(&[deployments, not_bool, error, clusters, named]);
    let eu = labels(&[("region", "eu")]);
    let summaries = rules.evaluate(&ready_objects(), "edge-1", &eu);
    let counts: BTreeMap<&str, u64> = summaries
        .iter()
        .map(|s| (s.rule.as_str(), s.all.count))
        .collect();
    // web (3) and api (1.5); cache's "3" > 0 is an error, db's 0 is not > 0.
    assert_eq!(counts["ready"], 2);
    assert_eq!(summaries[3].all.sum.0, 4.5);
    assert_eq!(counts["not-bool"], 0);
    assert_eq!(counts["error"], 2);
    assert_eq!(counts["eu"], 6);
    assert_eq!(counts["web"], 1);
    let us = rules.evaluate(&ready_objects(), "edge-1", &labels(&[("region", "us")]));
    assert_eq!(us[1].rule, "eu");
    assert_eq!(
        us[1].all.count, 0,
        "a rule with no values still has its summary"
    );
}

#[test]
fn group_by_a_cluster_label_merges_up_the_tree() {
    let mut ready = rule("ready", Aggregate::Sum, Some("object.status.readyReplicas"));
    ready.group_by = Some("region".into());
    let rules = compiled(std::slice::from_ref(&ready));
    let objects = [deployment("web", json!(2)), deployment("api", json!(1))];
    let reports = [
        rules.evaluate(&objects, "edge-1", &labels(&[("region", "eu")])),
        rules.evaluate(&objects[..1], "edge-2", &labels(&[("region", "eu")])),
        rules.evaluate(&objects, "edge-3", &labels(&[("region", "us")])),
        // No region label: the empty key.
        rules.evaluate(&objects[1..], "edge-4", &BTreeMap::new()),
    ];
    assert_eq!(reports[0][0].groups[0].0, "eu");
    assert_eq!(reports[3][0].groups[0].0, "");
    let merged = merge_rules(reports.iter().flatten());
    let rule = &merged[0];
    assert_eq!((rule.all.count, rule.all.sum.0), (6, 9.0));
    let groups: Vec<(&str, u64, f64)> = rule
        .groups
        .iter()
        .map(|(key, summary)| (key.as_str(), summary.count, summary.sum.0))
        .collect();
    assert_eq!(groups, [("", 1, 1.0), ("eu", 3, 5.0), ("us", 2, 3.0)]);
    assert_eq!(
        present(&ready, rule),
        json!({"name": "ready", "aggregate": "sum", "value": 9, "count": 6, "groups": [
            {"key": "", "value": 1, "count": 1},
            {"key": "eu", "value": 5, "count": 3},
            {"key": "us", "value": 3, "count": 2},
        ]})
    );
}

#[test]
fn present_writes_each_aggregate() {
    let values = [
        crate::summary::single(4.0, "edge-1"),
        crate::summary::single(1.5, "edge-2"),
        crate::summary::single(2.0, "edge-3"),
    ];
    let summary = RuleSummary {
        rule: "r".into(),
        all: merge_summaries(&values),
        groups: Vec::new(),
        other: Summary::default(),
    };
    let select = Some("object.status.readyReplicas");
    let value = |aggregate| present(&rule("r", aggregate, select), &summary)["value"].clone();
    assert_eq!(value(Aggregate::Count), json!(3));
    assert_eq!(value(Aggregate::Sum), json!(7.5));
    assert_eq!(value(Aggregate::Min), json!(1.5));
    assert_eq!(value(Aggregate::Max), json!(4));
    assert_eq!(value(Aggregate::Avg), json!(2.5));
    let mut top = rule("r", Aggregate::TopK, select);
    top.limit = 2;
    assert_eq!(
        present(&top, &summary),
        json!({"name": "r", "aggregate": "topk", "count": 3,
               "top": [{"cluster": "edge-1", "value": 4}, {"cluster": "edge-3", "value": 2}]})
    );
    let empty = RuleSummary::default();
    for aggregate in [Aggregate::Min, Aggregate::Max, Aggregate::Avg] {
        assert_eq!(
            present(&rule("r", aggregate, select), &empty),
            json!({"name": "r", "aggregate": aggregate.name(), "value": null, "count": 0})
        );
    }
    assert_eq!(
        present(&rule("r", Aggregate::Sum, select), &empty)["value"],
        json!(0)
    );
    let mut grouped = rule("r", Aggregate::Max, select);
    grouped.group_by = Some("region".into());
    let folded = RuleSummary {
        groups: vec![("eu".into(), values[1].clone())],
        other: merge_summaries(&values[..1]),
        ..summary.clone()
    };
    assert_eq!(
        present(&grouped, &folded),
        json!({"name": "r", "aggregate": "max", "value": 4, "count": 3,
               "groups": [{"key": "eu", "value": 1.5, "count": 1}],
               "other": {"value": 4, "count": 1}})
    );
}

#[test]
fn integers_are_written_as_integers() {
    assert_eq!(json_number(17.0).to_string(), "17");
    assert_eq!(json_number(-3.0).to_string(), "-3");
    assert_eq!(json_number(0.25).to_string(), "0.25");
    assert_eq!(json_number(1e300).to_string(), "1e+300");
    assert_eq!(json_number(f64::NAN), Value::Null);
}

proptest! {
    /// Per-cluster evaluation merged in any tree equals the aggregate of
    /// every value at once.
    #[test]
    fn evaluated_and_merged_values_aggregate_exactly(
        clusters in prop::collection::vec(
            (prop::collection::vec(-1000i64..1000, 0..5), prop::option::of("[a-c]")),
            0..12,
        ),
    ) {
        let mut ready = rule("ready", Aggregate::Sum, Some("object.status.readyReplicas * 2"));
        ready.group_by = Some("zone".into());
        let rules = compiled(&[ready, rule("n", Aggregate::Count, None)]);
        let mut reports = Vec::new();
        for (index, (values, zone)) in clusters.iter().enumerate() {
            let objects: Vec<Value> = values
                .iter()
                .map(|value| deployment("d", json!(value)))
                .collect();
            let labels = zone.iter().map(|zone| ("zone".to_string(), zone.clone())).collect();
            reports.push(rules.evaluate(&objects, &format!("c{index}"), &labels));
        }
        let merged = merge_rules(reports.iter().flatten());
        let values: Vec<i64> = clusters.iter().flat_map(|(values, _)| values.clone()).collect();
        if clusters.is_empty() {
            prop_assert!(merged.is_empty());
            return Ok(());
        }
        let (n, ready) = (&merged[0], &merged[1]);
        prop_assert_eq!(n.all.count, values.len() as u64);
        prop_assert_eq!(ready.all.count, values.len() as u64);
        prop_assert_eq!(ready.all.sum.0, values.iter().map(|v| 2.0 * *v as f64).sum::<f64>());
        prop_assert_eq!(ready.all.max.map(|n| n.0), values.iter().max().map(|v| 2.0 * *v as f64));
        prop_assert_eq!(ready.all.min.map(|n| n.0), values.iter().min().map(|v| 2.0 * *v as f64));
        let grouped: u64 = ready.groups.iter().map(|(_, summary)| summary.count).sum();
        prop_assert_eq!(grouped, ready.all.count);
    }

    /// Whatever the text, parsing answers (no panic) and an error names a
    /// field of the rule.
    #[test]
    fn any_expression_is_refused_or_compiled(source in "[a-z.()\\[\\]{}'\" +*<>=!,0-9\n]{0,60}") {
        let rules = json!([{"name": "r", "aggregate": "sum", "select": source}]);
        if let Err(error) = parse(Some(&rules)) {
            prop_assert!(error.field().starts_with("spec.statusRules[0]"), "{}", error);
        }
    }

    #[test]
    fn json_numbers_keep_their_value(value in prop_oneof![
        any::<i32>().prop_map(f64::from),
        -1e20f64..1e20,
    ]) {
        let written = json_number(value);
        prop_assert_eq!(written.as_f64(), Some(value));
        // Integers only where every integer is a double.
        prop_assert_eq!(written.is_i64(), value.fract() == 0.0 && value.abs() <= 2f64.powi(53));
    }

    #[test]
    fn positions_count_lines_and_characters(lines in prop::collection::vec("[a-zé ]{0,8}", 1..4)) {
        let source = lines.join("\n");
        let last = lines.last().map_or(0, |line| line.chars().count());
        prop_assert_eq!(
            line_and_column(&source, source.len()),
            Some((lines.len(), last + 1))
        );
    }
}
