//! Megatron's iteration record marks, `parsers.megatron.ITERATION`
//! (`iteration[ =]+(\d+)/ *(\d+) *\|`), found as `re.finditer` finds them on an ASCII line.
//! Each match starts at `iteration` and its classes do not overlap, so a match is found
//! at an `iteration` or not at all, with no backtracking to mimic.

/// A span of bytes, start and end.
pub type Span = (usize, usize);

/// The (counter, total) digit spans of each match in `line`, left to right.
pub fn iteration_marks(line: &[u8]) -> impl Iterator<Item = (Span, Span)> + '_ {
    let finder = memchr::memmem::Finder::new(b"iteration");
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < line.len() {
            let start = at + finder.find(&line[at..])?;
            match mark_at(line, start + 9) {
                Some((spans, end)) => {
                    at = end;
                    return Some(spans);
                }
                None => at = start + 1,
            }
        }
        None
    })
}

/// After `iteration`: `[ =]+ digits / spaces digits spaces |`; the two digit spans and the end.
fn mark_at(b: &[u8], mut i: usize) -> Option<((Span, Span), usize)> {
    let skip = |i: &mut usize, ok: &dyn Fn(u8) -> bool| -> usize {
        let from = *i;
        while *i < b.len() && ok(b[*i]) {
            *i += 1;
        }
        *i - from
    };
    if skip(&mut i, &|c| c == b' ' || c == b'=') == 0 {
        return None;
    }
    let first = i;
    if skip(&mut i, &|c| c.is_ascii_digit()) == 0 || b.get(i) != Some(&b'/') {
        return None;
    }
    let counter = (first, i);
    i += 1;
    skip(&mut i, &|c| c == b' ');
    let second = i;
    if skip(&mut i, &|c| c.is_ascii_digit()) == 0 {
        return None;
    }
    let total = (second, i);
    skip(&mut i, &|c| c == b' ');
    if b.get(i) != Some(&b'|') {
        return None;
    }
    Some(((counter, total), i + 1))
}

/// A counter's digits as `to_int` reads them, where they fit an i64.
pub fn counter(digits: &str) -> Option<i64> {
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(line: &str) -> Vec<(&str, &str)> {
        iteration_marks(line.as_bytes()).map(|(a, b)| (&line[a.0..a.1], &line[b.0..b.1])).collect()
    }

    #[test]
    fn finds_each_record() {
        assert_eq!(marks(" iteration       30/      50 | lm loss: 1.0 |"), vec![("30", "50")]);
        assert_eq!(marks("iteration=  1/  317892 | x"), vec![("1", "317892")]);
        assert_eq!(marks("iteration 1/ 2 |iteration 3/4|"), vec![("1", "2"), ("3", "4")]);
        assert_eq!(marks("iterationiteration 5/6 |"), vec![("5", "6")]);
        assert!(marks("iteration 1/2 x |").is_empty());
        assert!(marks("iteration1/2 |").is_empty());
        assert!(marks("iteration 1 /2 |").is_empty());
        assert!(marks("iteration 1/ |").is_empty());
    }
}
