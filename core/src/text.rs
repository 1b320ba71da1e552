//! Offsets: Python slices a block by characters, the core reads its UTF-8 bytes; and which text
//! the core reads as Python does.

/// Whether the core reads `bytes` as the Python definitions do: ASCII (Python's `\d`, `\w` and
/// case folding are Unicode's) without the separators \x1c-\x1f (Python's `\s` and `str.isspace`
/// hold them, the regex crate's do not); any other text goes to Python.  Every line a reader
/// types comes here: the ASCII test a word at a time, the separators by memchr.
pub fn plain(bytes: &[u8]) -> bool {
    bytes.is_ascii() && memchr::memchr3(0x1c, 0x1d, 0x1e, bytes).is_none() && memchr::memchr(0x1f, bytes).is_none()
}

/// White space on a [`plain`] line: Python's `\s` there, and the regex crate's (tab to carriage
/// return, and space).
pub fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// A declared shape's mark (`what`'s `name`): one ASCII punctuation character.
pub fn mark(what: &str, name: &str, text: &str) -> Result<u8, String> {
    match text.as_bytes() {
        [b] if b.is_ascii_punctuation() => Ok(*b),
        _ => Err(format!("the {what}'s {name:?} is not one ASCII punctuation character: {text:?}")),
    }
}

/// Characters between two checkpoints of an [`Index`].
pub const INDEX_STEP: usize = 1 << 8;

/// Where every [`INDEX_STEP`]th character of a text that is not ASCII starts: a block is asked
/// for offsets by every reader and hook rule the core runs on it, and each walked the block from
/// its start (7 % of the CPU of a summary of ds-neox-stronghold, whose blocks hold a few
/// non-ASCII lines); with the index a walk starts at most a step before its offset.
pub struct Index {
    at: Vec<usize>,
}

impl Index {
    pub fn build(text: &str) -> Index {
        let mut cursor = Cursor::new(text);
        let mut at = vec![0];
        while cursor.byte < text.len() {
            let b = cursor.byte_of(at.len() * INDEX_STEP);
            if b >= text.len() {
                break;
            }
            at.push(b);
        }
        Index { at }
    }
}

/// Moves through a text, turning byte offsets into character offsets and back, forward from the
/// offset asked before (from the text's start, or with an [`Index`] its nearest checkpoint, when
/// an offset lies behind or far ahead).
pub struct Cursor<'a> {
    bytes: &'a [u8],
    ascii: bool,
    byte: usize,
    chr: usize,
    index: Option<&'a Index>,
}

fn is_lead(b: u8) -> bool {
    (b & 0xC0) != 0x80
}

/// The characters starting in `bytes`: eight bytes at a time (continuation bytes are 10xxxxxx:
/// bit 7 set, bit 6, shifted onto bit 7, clear), the rest one by one.
fn leads(bytes: &[u8]) -> usize {
    let chunks = bytes.chunks_exact(8);
    let rest = chunks.remainder().iter().filter(|&&b| is_lead(b)).count();
    chunks.fold(rest, |n, c| {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        n + 8 - (w & !(w << 1) & 0x8080_8080_8080_8080).count_ones() as usize
    })
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor { ascii: text.is_ascii(), ..Cursor::indexed(text, None) }
    }

    /// A cursor that jumps by `index`: the text's own, or None for a text known to be ASCII.
    pub fn indexed(text: &'a str, index: Option<&'a Index>) -> Self {
        Cursor { bytes: text.as_bytes(), ascii: index.is_none(), byte: 0, chr: 0, index }
    }

    /// The byte offset of character offset `target`.
    pub fn byte_of(&mut self, target: usize) -> usize {
        if self.ascii {
            return target.min(self.bytes.len());
        }
        if let Some(index) = self.index {
            let i = (target / INDEX_STEP).min(index.at.len() - 1);
            if target < self.chr || i * INDEX_STEP > self.chr {
                self.chr = i * INDEX_STEP;
                self.byte = index.at[i];
            }
        }
        if target < self.chr {
            self.byte = 0;
            self.chr = 0;
        }
        // (self.chr counts the characters starting before self.byte)
        let bytes = self.bytes;
        // an ASCII stretch up to the target (most of a block that is not ASCII is): as many bytes as
        // characters (an ASCII byte is a character's start, so self.byte is one too)
        let ahead = self.byte + (target - self.chr);
        if ahead <= bytes.len() && bytes[self.byte..ahead].is_ascii() {
            self.chr = target;
            self.byte = ahead;
            return ahead;
        }
        // eight bytes at a time while the target lies beyond them: a block's offsets asked by
        // each rule cost a walk of the block, 1 ms a MB byte by byte
        while self.byte + 8 <= bytes.len() {
            let w = u64::from_le_bytes(bytes[self.byte..self.byte + 8].try_into().expect("8 bytes"));
            // continuation bytes are 10xxxxxx: bit 7 set, bit 6 (shifted onto bit 7) clear
            let leads = 8 - (w & !(w << 1) & 0x8080_8080_8080_8080).count_ones() as usize;
            if self.chr + leads > target {
                break;
            }
            self.chr += leads;
            self.byte += 8;
        }
        while self.byte < bytes.len() {
            if is_lead(bytes[self.byte]) {
                if self.chr == target {
                    break;
                }
                self.chr += 1;
            }
            self.byte += 1;
        }
        self.byte
    }

    /// The character offset of byte offset `target` (the start of a character).
    pub fn char_of(&mut self, target: usize) -> usize {
        if self.ascii {
            return target;
        }
        // (a target a step ahead or less: walked from here, without the checkpoints' binary search,
        // which was most of a conversion of a block's ascending line starts)
        let near = target >= self.byte && target - self.byte <= INDEX_STEP;
        if let (Some(index), false) = (self.index, near) {
            let i = index.at.partition_point(|&b| b <= target) - 1;  // (the last checkpoint at or before it)
            if target < self.byte || index.at[i] > self.byte {
                self.chr = i * INDEX_STEP;
                self.byte = index.at[i];
            }
        }
        if target < self.byte {
            self.byte = 0;
            self.chr = 0;
        }
        self.chr += leads(&self.bytes[self.byte..target]);
        self.byte = target;
        self.chr
    }
}

/// The text of each `(start, end)` of `spans` (character offsets, ascending), as Python's
/// `text[start:end]` gives it.
pub fn slices<'a>(text: &'a str, index: Option<&'a Index>, spans: impl IntoIterator<Item = (usize, usize)>)
    -> Vec<&'a str> {
    let mut cursor = Cursor::indexed(text, index);
    spans.into_iter().map(|(a, z)| {
        let a = cursor.byte_of(a);
        &text[a..cursor.byte_of(z).max(a)]
    }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_is_ascii_without_separators() {
        assert!(plain(b"iteration 5 | loss: 1.0\t"));
        assert!(!plain("caf\u{e9}".as_bytes()));
        for sep in 0x1cu8..=0x1f {
            assert!(!plain(&[b'a', sep, b'b']));
        }
        assert!(plain(b"\x1b[0m \x0b\x0c"));
    }

    /// The byte offset of the `target`th character, one character at a time.
    fn naive(text: &str, target: usize) -> usize {
        text.char_indices().nth(target).map_or(text.len(), |(b, _)| b)
    }

    #[test]
    fn word_steps_land_where_characters_do() {
        let pieces = ["a", "é", "█", "😀", "\n", "abcdefgh", "ééééé", "x😀y"];
        let mut seed = 7u64;
        for _ in 0..300 {
            let mut text = String::new();
            for _ in 0..40 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                text.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
            }
            let n = text.chars().count();
            let mut c = Cursor::new(&text);
            for target in (0..n + 3).step_by(1 + (seed as usize % 5)) {
                assert_eq!(c.byte_of(target), naive(&text, target), "{text:?} {target}");
            }
            let mut c = Cursor::new(&text);
            for target in [n / 2, 1, n, 0, n + 5] {
                assert_eq!(c.byte_of(target), naive(&text, target), "{text:?} {target}");
                let b = naive(&text, target);
                assert_eq!(c.char_of(b), target.min(n));
            }
        }
    }

    #[test]
    fn an_index_lands_where_characters_do_in_any_order() {
        let pieces = ["a", "é", "█", "😀", "\n", "abcdefgh", "ééééé", "x😀y", "0123456789abcdef"];
        let mut seed = 11u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for size in [1usize, 500, 3000, 9000] {
            let mut text = String::new();
            for _ in 0..size {
                text.push_str(pieces[next() % pieces.len()]);
            }
            let chars: Vec<usize> = text.char_indices().map(|(b, _)| b).chain([text.len()]).collect();
            let n = chars.len() - 1;
            let index = Index::build(&text);
            let mut c = Cursor::indexed(&text, Some(&index));
            for _ in 0..400 {
                let target = next() % (n + 8);
                assert_eq!(c.byte_of(target), chars[target.min(n)], "{size} {target}");
                let t = next() % (n + 1);
                assert_eq!(c.char_of(chars[t]), t, "{size} {t}");
            }
        }
    }

    #[test]
    fn ascending_offsets_land_where_characters_do() {
        // a block's line starts asked in order: mostly ASCII lines, a few wide characters, steps
        // shorter and longer than the index's (the walks from the last offset, and the ASCII stretches)
        let pieces = ["abcdefgh ", "0123456789abcdef\n", "é", "█", "😀", "\n", "x"];
        let mut seed = 5u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for size in [50usize, 2000, 20000] {
            let mut text = String::new();
            for _ in 0..size {
                let k = next() % 40;
                text.push_str(pieces[if k < 36 { k % 2 } else { 2 + k % 5 }]);
            }
            let chars: Vec<usize> = text.char_indices().map(|(b, _)| b).chain([text.len()]).collect();
            let n = chars.len() - 1;
            let index = Index::build(&text);
            for stride in [1usize, 7, 100, INDEX_STEP - 1, INDEX_STEP, INDEX_STEP + 1, 3 * INDEX_STEP] {
                let (mut by_char, mut by_byte) = (Cursor::indexed(&text, Some(&index)), Cursor::indexed(&text, Some(&index)));
                let mut t = next() % stride;
                while t <= n + 2 {
                    assert_eq!(by_char.byte_of(t), chars[t.min(n)], "{size} {stride} {t}");
                    if t <= n {
                        assert_eq!(by_byte.char_of(chars[t]), t, "{size} {stride} {t}");
                    }
                    t += 1 + next() % stride;
                }
            }
        }
    }

    #[test]
    fn round_trips_through_multibyte_text() {
        let text = "a█b\nçé\nz";
        let mut c = Cursor::new(text);
        assert_eq!(c.byte_of(2), 4);
        assert_eq!(c.char_of(5), 3);
        assert_eq!(c.byte_of(4), 6);
        assert_eq!(c.char_of(text.len()), text.chars().count());
        assert_eq!(Cursor::new("abc").byte_of(2), 2);
    }
}
