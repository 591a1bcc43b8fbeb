use proptest::prelude::*;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn expression(key: &str, operator: SelectorOperator, values: &[&str]) -> LabelRequirement {
    requirement(
        key.to_string(),
        operator,
        values.iter().map(|v| v.to_string()).collect(),
    )
}

#[test]
fn parses_the_kubectl_syntax() {
    let parsed = parse(" a=b, c!=d,e in (x, y),f notin (z),g,!h,i==j ");
    let expected = LabelSelector {
        match_labels: labels(&[("a", "b"), ("i", "j")]),
        match_expressions: vec![
            expression("c", SelectorOperator::NotIn, &["d"]),
            expression("e", SelectorOperator::In, &["x", "y"]),
            expression("f", SelectorOperator::NotIn, &["z"]),
            expression("g", SelectorOperator::Exists, &[]),
            expression("h", SelectorOperator::DoesNotExist, &[]),
        ],
    };
    assert_eq!(parsed, Ok(expected));
    assert_eq!(parse(""), Ok(LabelSelector::default()));
    assert_eq!(parse("   "), Ok(LabelSelector::default()));
    // A second `=` on one key keeps both conditions.
    let twice = parse("a=b,a=c").expect("valid");
    assert_eq!(twice.match_labels, labels(&[("a", "b")]));
    assert_eq!(
        twice.match_expressions,
        vec![expression("a", SelectorOperator::In, &["c"])]
    );
    // Keys and values may be the words `in` and `notin`.
    let words = parse("in in (notin),notin").expect("valid");
    assert_eq!(words.match_expressions.len(), 2);
    let prefixed = parse("relaymesh.dev/tier=edge,empty=").expect("valid");
    assert_eq!(
        prefixed.match_labels,
        labels(&[("relaymesh.dev/tier", "edge"), ("empty", "")])
    );
}

#[test]
fn refuses_malformed_text() {
    for text in [
        "a=b,", ",a", "a in (x", "a in x", "a > 3", "a b", "=b", "!", "a=b=c", "a!", "-a=b",
        "a=-b", "A.b/c=d", "a=b c",
    ] {
        assert!(parse(text).is_err(), "{text:?} should be refused");
    }
    assert_eq!(
        parse("a in ()").map(|s| s.match_expressions),
        Ok(vec![expression("a", SelectorOperator::In, &[""])])
    );
    assert_eq!(
        parse("a=b,"),
        Err(SelectorError::UnexpectedEnd {
            expected: "a label key"
        })
    );
}

#[test]
fn matches_with_kubernetes_semantics() {
    let cluster = labels(&[("region", "eu"), ("tier", "edge")]);
    assert!(matches(&LabelSelector::default(), &cluster));
    assert!(matches(&LabelSelector::default(), &BTreeMap::new()));
    let check = |text: &str| matches(&parse(text).expect("valid"), &cluster);
    assert!(check("region=eu"));
    assert!(!check("region=us"));
    assert!(check("region in (us,eu),tier"));
    assert!(check("zone notin (a)"), "NotIn matches an absent key");
    assert!(check("zone!=a"));
    assert!(!check("tier notin (edge)"));
    assert!(check("!zone"));
    assert!(!check("!tier"));
    assert!(!check("zone"));
    assert!(!check("zone in (a)"));
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-c]",
        Just("in".to_string()),
        Just("notin".to_string()),
        Just("relaymesh.dev/tier".to_string()),
        "[a-z][a-z0-9_.-]{0,8}[a-z0-9]",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof!["[x-z]", "[A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?"]
}

/// Valid selectors: `In`/`NotIn` with values, `Exists`/`DoesNotExist`
/// without.
fn selector() -> impl Strategy<Value = LabelSelector> {
    let values = prop::collection::vec(prop_oneof![3 => value(), 1 => Just(String::new())], 1..4);
    let expression = (key(), 0..4u8, values).prop_map(|(key, operator, values)| match operator {
        0 => requirement(key, SelectorOperator::In, values),
        1 => requirement(key, SelectorOperator::NotIn, values),
        2 => requirement(key, SelectorOperator::Exists, vec![]),
        _ => requirement(key, SelectorOperator::DoesNotExist, vec![]),
    });
    (
        prop::collection::btree_map(key(), prop_oneof![value(), Just(String::new())], 0..3),
        prop::collection::vec(expression, 0..4),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

fn label_set() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(key(), value(), 0..4)
}

/// A second, deliberately plain reading of the Kubernetes rules over a list
/// of pairs.
fn reference(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs: Vec<(&String, &String)> = labels.iter().collect();
    let lookup = |key: &String| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    for (key, value) in &selector.match_labels {
        if lookup(key) != Some(value) {
            return false;
        }
    }
    for requirement in &selector.match_expressions {
        let found = lookup(&requirement.key);
        let listed = found.is_some_and(|v| requirement.values.iter().any(|x| x == v));
        let ok = match requirement.operator {
            SelectorOperator::In => listed,
            SelectorOperator::NotIn => !listed,
            SelectorOperator::Exists => found.is_some(),
            SelectorOperator::DoesNotExist => found.is_none(),
        };
        if !ok {
            return false;
        }
    }
    true
}

proptest! {
    #[test]
    fn render_then_parse_is_the_identity(selector in selector()) {
        let text = render(&selector);
        prop_assert_eq!(parse(&text), Ok(selector), "text {:?}", text);
    }

    #[test]
    fn matches_agrees_with_the_reference(selector in selector(), labels in label_set()) {
        prop_assert_eq!(matches(&selector, &labels), reference(&selector, &labels));
    }

    #[test]
    fn parse_never_panics(text in "[a-c=!,() in\u{e9}.-]{0,24}") {
        if let Ok(selector) = parse(&text) {
            // Whatever parses renders to text that parses the same.
            prop_assert_eq!(parse(&render(&selector)), Ok(selector));
        }
    }
}
