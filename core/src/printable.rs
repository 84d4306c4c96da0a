//! Text that others wrote (a lock node's label or host, an ACL id) made safe to show on a
//! terminal.

/// `text` with control characters, and those that reorder or hide text (bidirectional
/// overrides, line separators), as Rust's `\u{..}` escapes: a label or an ACL id with `\n` or
/// `\x1b[31m` cannot split a row, colour the reader's terminal or ring its bell. For `zklock
/// status` and for this crate's messages; not part of the API.
#[doc(hidden)]
pub fn printable(text: &str) -> String {
    let hides = |c: char| {
        c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(hides) {
        return text.to_owned();
    }
    text.chars().fold(String::with_capacity(text.len() + 8), |mut out, c| {
        if hides(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_text_cannot_move_the_cursor_or_colour_the_terminal() {
        assert_eq!(printable("thread:worker-3"), "thread:worker-3");
        assert_eq!(printable("a\nb\x1b[31m"), "a\\u{a}b\\u{1b}[31m");
        assert_eq!(printable("x\u{202e}y\u{7f}"), "x\\u{202e}y\\u{7f}");
        assert_eq!(printable("ünïcode 🔒"), "ünïcode 🔒");
    }
}
