//! Which lines of a block hold each of many literals (`tuimon.engine.presence`'s question).
//!
//! An Aho-Corasick automaton over every byte of a block ran at about 450 MB/s, the largest
//! single cost of the compiled core.  Training logs repeat their lines with other numbers, so
//! a line is looked up first by its text with each digit read as `0`: a literal without a digit
//! occurs in a line exactly where it occurs in that masked text (it covers no digit), so two
//! lines of one masked text hold the same such literals, and the automaton runs only on a line
//! whose masked text is new (bytes: an ASCII digit is never part of another UTF-8 character).
//! The few literals holding a digit are found over the whole block, each by a SIMD search of its
//! own.  The masked texts are kept in a bounded table, emptied when full.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use std::collections::HashMap;
use std::sync::Mutex;

/// Lines longer than this are not kept (the automaton reads them): a key is at most this long.
const MAX_KEY: usize = 512;
/// Masked lines kept at most (4 MB of keys at most, for every file the rules are shared by: 2,048 missed
/// a seventh of the lines of a NeoX log, whose runs repeat their start-up every few thousand lines).
const MAX_LINES: usize = 8192;

/// The masked lines seen, with the literals each holds (std's hash: keyed at random, as a log is anybody's
/// text; a multiplicative hash of 8 bytes at a time was no faster here).
type Lines = HashMap<Vec<u8>, Vec<u32>>;

/// The literals, their automata and the masked lines seen.
pub struct Scanner {
    all: AhoCorasick,
    count: usize,
    /// the literals holding a digit (each found by a SIMD search of its own: an automaton of them
    /// read every byte), and their numbers among all
    digits: Vec<(memchr::memmem::Finder<'static>, usize)>,
    /// whether each literal holds a digit
    numbered: Vec<bool>,
    /// whether a line can be looked up (no literal holds a newline)
    by_line: bool,
    seen: Mutex<Lines>,
}

fn automaton<S: AsRef<[u8]>>(literals: &[S]) -> Result<AhoCorasick, String> {
    AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::DFA))
        .build(literals)
        .map_err(|e| e.to_string())
}

impl Scanner {
    pub fn new(literals: &[String]) -> Result<Scanner, String> {
        let digit = |l: &String| l.bytes().any(|b| b.is_ascii_digit());
        let numbered: Vec<usize> = (0..literals.len()).filter(|&k| digit(&literals[k])).collect();
        let digits = numbered.iter().map(|&k| (memchr::memmem::Finder::new(literals[k].as_bytes()).into_owned(), k))
            .collect();
        Ok(Scanner { all: automaton(literals)?, count: literals.len(), digits, numbered: literals.iter().map(digit).collect(),
                     by_line: !literals.iter().any(|l| l.contains('\n')), seen: Mutex::new(Lines::default()) })
    }

    pub fn automaton(&self) -> &AhoCorasick {
        &self.all
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// The lines of `bytes` holding each literal (what one automaton over the whole block finds).
    pub fn lines(&self, bytes: &[u8]) -> Held {
        if !self.by_line {
            return self.lines_whole(bytes);
        }
        let mut held = Held { lines: Vec::new(), of: vec![Vec::new(); self.count], apart: Vec::new() };
        for (finder, k) in &self.digits {
            let (mut list, mut line_end) = (Vec::new(), 0usize);
            for at in finder.find_iter(bytes) {
                if at >= line_end {
                    list.push(memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1));
                    line_end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i + 1);
                }
            }
            held.apart.push((*k, list));
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut key: Vec<u8> = Vec::with_capacity(MAX_KEY);
        let mut found: Vec<u32> = Vec::new();
        let mut start = 0;
        while start < bytes.len() {
            let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            let line = &bytes[start..end];
            key.clear();
            key.extend(line.iter().map(|&b| if b.is_ascii_digit() { b'0' } else { b }));
            let ids: &[u32] = match seen.get(&key) {
                Some(ids) => ids,
                None => {
                    found.clear();
                    for m in self.all.find_overlapping_iter(line) {
                        let k = m.pattern().as_u32();
                        if !self.numbered[k as usize] && !found.contains(&k) {
                            found.push(k);
                        }
                    }
                    if line.len() <= MAX_KEY {
                        if seen.len() >= MAX_LINES {
                            seen.clear();
                        }
                        seen.insert(key.clone(), found.clone());
                    }
                    &found
                }
            };
            if !ids.is_empty() {
                let at = held.lines.len() as u32;
                held.lines.push(start);
                for &k in ids {
                    held.of[k as usize].push(at);
                }
            }
            start = end + 1;
        }
        held
    }

    /// What `lines` gives, by one automaton over the whole block.
    pub fn lines_whole(&self, bytes: &[u8]) -> Held {
        let mut held = Held { lines: Vec::new(), of: vec![Vec::new(); self.count], apart: Vec::new() };
        each_line_of(&self.all, bytes, |k, start| {
            if held.lines.last() != Some(&start) {
                held.lines.push(start);
            }
            let at = (held.lines.len() - 1) as u32;
            if held.of[k].last() != Some(&at) {
                held.of[k].push(at);
            }
        });
        held
    }
}

/// Where literals were found: the starts of the lines holding one (byte offsets, ascending), each
/// literal's lines among them (ascending), and apart, the starts of each of some literals' lines.
#[derive(Debug)]
pub struct Held {
    pub lines: Vec<usize>,
    pub of: Vec<Vec<u32>>,
    pub apart: Vec<(usize, Vec<usize>)>,
}

impl Held {
    /// Each literal's line starts (through `at`, a byte offset's place in the caller's offsets:
    /// each list ascending), the literals holding none left out, in the literals' order.
    pub fn starts(self, mut at: impl FnMut(&[usize]) -> Vec<usize>) -> Vec<(usize, Vec<usize>)> {
        let lines = at(&self.lines);
        let mut out: Vec<(usize, Vec<usize>)> = self.of.into_iter().enumerate()
            .map(|(k, of)| (k, of.into_iter().map(|i| lines[i as usize]).collect::<Vec<_>>()))
            .collect();
        for (k, list) in self.apart {
            out[k].1 = at(&list);
        }
        out.retain(|(_, v)| !v.is_empty());
        out
    }
}

/// Each match of `automaton` in `bytes` (in the order of their ends), as (literal, start of its line).
fn each_line_of(automaton: &AhoCorasick, bytes: &[u8], mut out: impl FnMut(usize, usize)) {
    let (mut line_start, mut line_end) = (0usize, 0usize);
    for m in automaton.find_overlapping_iter(bytes) {
        let at = m.start();
        if at >= line_end {
            line_start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
            line_end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i + 1);
        }
        out(m.pattern().as_usize(), line_start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Draws;

    // (made-up literals, none a format's)
    const LITERALS: &[&str] = &["abc", "bcd", "x1", "step ", "q", "zz9z", "loss:", "a b", ":", "abcabc", "é",
                                "c٣"];
    const PIECES: &[&str] = &["abc", "bcd", "x", "1", "23", "9", "z", "zz", "step", " ", "q", "loss", ":", "a", "b",
                              "c", "d", "\n", "\n", "\n", "x1", "0", "é", "٣"];

    fn block(d: &mut Draws, pieces: usize) -> String {
        (0..pieces).map(|_| PIECES[d.below(PIECES.len())]).collect()
    }

    #[test]
    fn lines_looked_up_by_their_masked_text_hold_what_the_automaton_finds() {
        let literals: Vec<String> = LITERALS.iter().map(|s| s.to_string()).collect();
        let scanner = Scanner::new(&literals).unwrap();
        assert_eq!(scanner.digits.iter().map(|d| d.1).collect::<Vec<_>>(), [2, 5]);
        let mut d = Draws::new(7);
        let mut hits = 0;
        for round in 0..3000 {
            let pieces = 1 + d.below(400);
            let text = block(&mut d, pieces);
            let want = scanner.lines_whole(text.as_bytes()).starts(<[usize]>::to_vec);
            let got = scanner.lines(text.as_bytes()).starts(<[usize]>::to_vec);
            assert_eq!(got, want, "round {round}: {text:?}");
            hits += got.iter().map(|(_, v)| v.len()).sum::<usize>();
        }
        assert!(hits > 50_000, "{hits}");
        assert!(scanner.seen.lock().unwrap().len() > 100, "lines were looked up");
    }

    #[test]
    fn a_full_table_starts_again() {
        let scanner = Scanner::new(&["ab".to_string()]).unwrap();
        let text: String = (0..3 * MAX_LINES).map(|k| format!("ab{}{k}\n", "x".repeat(k % 7))).collect();
        let got = scanner.lines(text.as_bytes()).starts(<[usize]>::to_vec);
        assert_eq!(got, scanner.lines_whole(text.as_bytes()).starts(<[usize]>::to_vec));
        assert!(scanner.seen.lock().unwrap().len() <= MAX_LINES);
        assert!(Scanner::new(&["a\nb".to_string()]).is_ok_and(|s| !s.by_line));
    }
}
