//! Core's names (states, lost reasons) as JavaScript spells them: a leaf, which the errors, the
//! holds and the client all use.

/// Core's snake_case names (`session_expired`) as JavaScript spells them (`sessionExpired`).
pub(crate) fn camel_case(name: &str) -> String {
    let mut words = name.split('_');
    let first = words.next().unwrap_or_default().to_owned();
    words.fold(first, |mut camel, word| {
        let mut chars = word.chars();
        camel.extend(chars.next().map(|c| c.to_ascii_uppercase()));
        camel.push_str(chars.as_str());
        camel
    })
}
