//! Kubernetes' rules for label keys and values, in one place: the
//! selector parser, status rules, a Placement's spec and the root's API
//! all check labels here, with kube-apiserver's messages.

/// A qualified name, as a label key: an optional DNS-subdomain prefix and
/// `/`, then a [name part](is_name_part).
pub fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty() && is_dns1123_subdomain(prefix) && is_name_part(name)
        }
        None => is_name_part(key),
    }
}

/// A label name or non-empty value: at most 63 characters, alphanumeric at
/// both ends, `-`, `_` and `.` inside.
pub fn is_name_part(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Whether `name` is a DNS-1123 subdomain: at most 253 characters of
/// `[a-z0-9-]` parts joined by dots, each alphanumeric at both ends. As in
/// Kubernetes, a part may be longer than 63 characters (kubelet names
/// VolumeAttachments `csi-` and a 64-digit hash).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    let part = |part: &str| {
        part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    name.len() <= 253 && name.split('.').all(part)
}

/// Why a label is invalid, in kube-apiserver's words, if it is: the key a
/// qualified name (an optional DNS subdomain prefix and `/`, then at most
/// 63 characters of `[A-Za-z0-9-_.]`, alphanumeric at both ends), the value
/// empty or such a name part.
pub fn label_error(key: &str, value: &str) -> Option<String> {
    if !is_qualified_name(key) {
        return Some(format!(
            "Invalid value: {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
    }
    if !value.is_empty() && !is_name_part(value) {
        return Some(format!(
            "Invalid value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_follow_kubernetes() {
        // The API's cases are in relaymesh-apiserver's validation tests.
        assert!(label_error("tier", "-edge").is_some());
        assert!(label_error(&"a".repeat(64), "").is_some());
        assert!(is_qualified_name("example.com/a"));
        assert!(!is_qualified_name("-a.com/a"));
    }
}
