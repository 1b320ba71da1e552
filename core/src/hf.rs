//! Hugging Face Trainer's metrics dicts (`parsers/hf_trainer.py`, `_on_dict`): the pairs of
//! `_PAIR`, `'([A-Za-z_/]+)': ('?)([-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|inf|nan))\2(?=[,}])`,
//! found as `re.findall` finds them on an ASCII line: a value bare (transformers 4) or quoted
//! (transformers 5 and ms-swift print `'loss': '10.96'`), its quotes matched.  Each part of
//! the pattern is followed by a character its repeat cannot take (or by a lookahead only a
//! separator meets), so no shorter repeat can match where the longest fails: a match is found
//! greedily or not at all.

use crate::numbers;

fn key_char(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'/'
}

/// The number of the value at `j`, quoted or bare: its `(start, end)` and the end of the whole
/// value, where the quote it opened with closes and a separator follows.
fn value_span(b: &[u8], j: usize) -> Option<(usize, usize, usize)> {
    let separated = |at: usize| matches!(b.get(at), Some(b',' | b'}'));
    if b.get(j) == Some(&b'\'') {
        let quoted = |at: usize| b.get(at) == Some(&b'\'') && separated(at + 1);
        let end = number_end(b, j + 1, &quoted)?;
        return Some((j + 1, end, end + 1));
    }
    let end = number_end(b, j, &separated)?;
    Some((j, end, end))
}

/// The end of the number starting at `j` (its sign included), where `closes` holds.
fn number_end(b: &[u8], j: usize, closes: &dyn Fn(usize) -> bool) -> Option<usize> {
    let mut k = j;
    if k < b.len() && (b[k] == b'-' || b[k] == b'+') {
        k += 1;
    }
    let end = if b[k..].starts_with(b"inf") || b[k..].starts_with(b"nan") {
        k + 3
    } else if k < b.len() && b[k].is_ascii_digit() {
        k += 1;
        while k < b.len() && (b[k].is_ascii_digit() || b[k] == b'.') {
            k += 1;
        }
        let digits = k;
        k = numbers::exponent_end(b, k);
        // with the exponent, or without it (then the next is an e: no separator)
        if k > digits && !closes(k) {
            digits
        } else {
            k
        }
    } else {
        return None;
    };
    closes(end).then_some(end)
}

/// The `(key, value)` of every pair in `line`, in order.
pub fn pairs(line: &str) -> Vec<(&str, &str)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(q) = memchr::memchr(b'\'', &b[i..]) {
        let start = i + q;
        let mut k = start + 1;
        while k < b.len() && key_char(b[k]) {
            k += 1;
        }
        if k > start + 1 && b[k..].starts_with(b"': ") {
            if let Some((from, to, end)) = value_span(b, k + 3) {
                out.push((&line[start + 1..k], &line[from..to]));
                i = end;
                continue;
            }
        }
        i = start + 1;
    }
    out
}

/// A dict line's pairs typed as `to_float` types them, where every value reads as Rust reads
/// it (else None: the hook reads the line).
pub fn typed(line: &str) -> Option<Vec<(&str, f64)>> {
    if !crate::text::plain(line.as_bytes()) || has_quoted_text(line) {
        return None;
    }
    pairs(line).into_iter().map(|(k, v)| numbers::fast_float(v).map(|x| (k, x))).collect()
}

/// Whether a value of the dict is quoted text that is no number (`'1/94'`, `'2m 3s'`): such a
/// dict (ms-swift's) is the hook's to read whole, strings and all.
fn has_quoted_text(line: &str) -> bool {
    let b = line.as_bytes();
    let mut i = 0;
    while let Some(at) = memchr::memmem::find(&b[i..], b"': '") {
        let j = i + at + 3;
        if value_span(b, j).is_none() {
            return true;
        }
        i = j + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_as_findall_finds_them() {
        let line = "{'loss': 2.9859, 'grad_norm': 0.97, 'learning_rate': 4.1e-05, 'epoch': 0.16}";
        assert_eq!(pairs(line), vec![("loss", "2.9859"), ("grad_norm", "0.97"), ("learning_rate", "4.1e-05"),
                                     ("epoch", "0.16")]);
        assert_eq!(pairs("{'a': 1e5x, 'b': -inf}"), vec![("b", "-inf")]);
        assert_eq!(pairs("{'a': 1.2e, 'b': 2}"), vec![("b", "2")]);
        assert_eq!(pairs("{'a': 1.2.3}"), vec![("a", "1.2.3")]);
        assert_eq!(pairs("{'x': 'y', 'a/b': 3}"), vec![("a/b", "3")]);
        assert_eq!(pairs("''': 1}"), vec![]);
        // transformers 5 and ms-swift quote the numbers; a quote must close where the number ends
        assert_eq!(pairs("{'loss': '10.96', 'learning_rate': '1.35e-05', 'epoch': '0.0125'}"),
                   vec![("loss", "10.96"), ("learning_rate", "1.35e-05"), ("epoch", "0.0125")]);
        assert_eq!(pairs("{'a': '1.5, 'b': 2.5', 'c': '-inf'}"), vec![("c", "-inf")]);
        assert_eq!(pairs("{'a': 2', 'b': '3}"), vec![]);
        assert_eq!(pairs("{'s': '10/100', 'loss': 'n/a', 'x': '1e5', 'y': '2e'}"), vec![("x", "1e5")]);
        // quoted text among the values (ms-swift's progress): the hook reads the line
        assert!(typed("{'loss': 1.5, 'global_step/max_steps': '1/94', 'epoch': 0.01}").is_none());
        assert!(typed("{'loss': '1.5', 'epoch': '0.01'}").is_some());
        assert!(typed("{'loss': nan}").is_none());
        assert_eq!(typed("{'loss': 2.0}"), Some(vec![("loss", 2.0)]));
    }
}
