//! A declared regex read without a regex engine where it is small enough to backtrack: literals,
//! runs of one class (`\S+`, `\d{1,9}`, `[^\],]*`, `\.{2,}`), and groups (capturing or not) of
//! alternatives, each a sequence of the same, the group once or optional (`(?:e[-+]?\d+)?`,
//! `(?P<x>\d[\d.]*|nan|inf)`), an optional `^` first and `$` last.  A search tries the places of
//! its first literal (or every place), leftmost first.  Such a pattern is matched by backtracking
//! in the order the regex crate prefers (leftmost, then the first alternative that leads to a
//! match, greedy or lazy as written: its leftmost-first semantics are a backtracker's), so the
//! match and its groups are the regex's; a line that is not ASCII, or whose backtracking runs past
//! a bound, is the regex's to read (`Found::GaveUp`).  The regex crate spends most of a line on
//! capture groups (its bounded backtracker or PikeVM): 0.7-1.1 us on the rate lines and the
//! hand-written loops' step lines, where a template takes a find of its first literal and a pass
//! over the line.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// Backtracking steps a line may take before it is left to the regex (each reads at most the
/// line: a line's worst case is bounded by both, a few milliseconds).
const STEPS: usize = 4096;
/// Lines longer than this are the regex's (linear in the line whatever it holds).
const MAX_LINE: usize = 2048;

/// One piece of a template.
#[derive(Debug, Clone)]
enum Piece {
    /// these bytes
    Lit { bytes: Vec<u8>, group: Option<usize> },
    /// `min..=max` bytes of `set` (ASCII: a bit per byte), as many as can be (greedy) or as few
    Run { set: u128, min: usize, max: usize, greedy: bool, group: Option<usize> },
    /// one of `branches` (each a sequence), the first that leads to a match; where `optional`, none
    /// too (tried after them when greedy, before them when lazy)
    Alt { branches: Vec<Vec<Piece>>, optional: bool, greedy: bool, group: Option<usize> },
}

/// A template (see the module's doc).
#[derive(Debug, Clone)]
pub struct Template {
    pieces: Vec<Piece>,
    /// the bytes a match starts with, where it cannot be empty (the places a search tries)
    first: Option<u128>,
    start: bool,
    end: bool,
    groups: usize,
    /// a line's alone (its `^` and `$` those of a multi-line pattern)
    line: bool,
    /// the first byte of its first literal, where it starts with one: the places a search tries (a
    /// `memmem::Finder` built a line was a twentieth of the core's time on Megatron's dense logs).  Not a
    /// `Finder` kept here: its AVX2 form holds 32-byte-aligned vectors, and a template lives inside
    /// a Python object, which Python's allocator aligns to 16 bytes (an aligned load faulted).
    lead: Option<u8>,
}

/// What a template makes of a line.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// the match's start and end (its groups in the slots)
    Match(usize, usize),
    NoMatch,
    /// the regex reads it
    GaveUp,
}

/// The ASCII bytes of a class (a template reads ASCII lines alone: its other members never meet one).
fn ascii_set(class: &Class) -> u128 {
    let mut set = 0u128;
    let has = |b: u8| match class {
        Class::Unicode(c) => c.ranges().iter().any(|r| r.start() <= b as char && b as char <= r.end()),
        Class::Bytes(c) => c.ranges().iter().any(|r| r.start() <= b && b <= r.end()),
    };
    for b in 0..128u8 {
        if has(b) {
            set |= 1 << b;
        }
    }
    set
}

/// The set of one byte's class or literal, where `hir` is one (what a run repeats).
fn byte_set(hir: &Hir) -> Option<u128> {
    match hir.kind() {
        HirKind::Class(class) => Some(ascii_set(class)),
        HirKind::Literal(lit) if lit.0.len() == 1 && lit.0.is_ascii() => Some(1u128 << lit.0[0]),
        _ => None,
    }
}

/// `hir` as a sequence of pieces (None: not one a template reads).
fn sequence(hir: &Hir) -> Option<Vec<Piece>> {
    let mut out = Vec::new();
    match hir.kind() {
        HirKind::Concat(nodes) => {
            for node in nodes {
                pieces_of(node, &mut out)?;
            }
        }
        _ => pieces_of(hir, &mut out)?,
    }
    Some(out)
}

/// The alternatives of `hir` (itself where it is not an alternation), each a sequence.
fn branches(hir: &Hir) -> Option<Vec<Vec<Piece>>> {
    match hir.kind() {
        HirKind::Alternation(alts) => alts.iter().map(sequence).collect(),
        _ => Some(vec![sequence(hir)?]),
    }
}

/// The pieces of one node, appended to `out`.
fn pieces_of(hir: &Hir, out: &mut Vec<Piece>) -> Option<()> {
    out.push(match hir.kind() {
        HirKind::Empty => return Some(()),
        HirKind::Literal(lit) if lit.0.is_ascii() => Piece::Lit { bytes: lit.0.to_vec(), group: None },
        HirKind::Class(class) => Piece::Run { set: ascii_set(class), min: 1, max: 1, greedy: true, group: None },
        HirKind::Repetition(rep) => match byte_set(&rep.sub) {
            Some(set) => {
                let max = rep.max.map_or(usize::MAX, |m| m as usize);
                Piece::Run { set, min: rep.min as usize, max, greedy: rep.greedy, group: None }
            }
            None if rep.min == 0 && rep.max == Some(1) => {
                Piece::Alt { branches: branches(&rep.sub)?, optional: true, greedy: rep.greedy, group: None }
            }
            None if rep.min == 1 && rep.max == Some(1) => return pieces_of(&rep.sub, out),
            None => return None,
        },
        HirKind::Capture(cap) => {
            let g = Some(cap.index as usize);
            let mut inner = Vec::new();
            pieces_of(&cap.sub, &mut inner)?;
            match inner.as_mut_slice() {
                // a literal or a run alone in its group: the piece keeps the group itself
                [Piece::Lit { group, .. } | Piece::Run { group, .. }] if group.is_none() => *group = g,
                // (not an optional one: a group around an optional part takes part, empty, when it is left out)
                [Piece::Alt { group, optional: false, .. }] if group.is_none() => *group = g,
                _ => return {
                    out.push(Piece::Alt { branches: vec![inner], optional: false, greedy: true, group: g });
                    Some(())
                },
            }
            out.extend(inner);
            return Some(());
        }
        HirKind::Concat(_) => return sequence(hir).map(|s| out.extend(s)),
        HirKind::Alternation(_) => Piece::Alt { branches: branches(hir)?, optional: false, greedy: true, group: None },
        _ => return None,
    });
    Some(())
}

/// The highest group number a piece of `pieces` fills, plus one (at least 1: group 0).
fn groups_in(pieces: &[Piece]) -> usize {
    pieces.iter().map(|p| match p {
        Piece::Lit { group, .. } | Piece::Run { group, .. } => group.map_or(1, |g| g + 1),
        Piece::Alt { branches, group, .. } => {
            branches.iter().map(|b| groups_in(b)).max().unwrap_or(1).max(group.map_or(1, |g| g + 1))
        }
    }).max().unwrap_or(1)
}

/// The bytes a match of `seq` can start with, and whether it can be empty (then it may start anywhere).
fn first_bytes(seq: &[Piece]) -> (u128, bool) {
    let mut set = 0u128;
    for p in seq {
        match p {
            Piece::Lit { bytes, .. } => match bytes.first() {
                Some(&b) => return (set | 1u128 << b, false),
                None => continue,
            },
            Piece::Run { set: run, min, .. } => {
                set |= run;
                if *min > 0 {
                    return (set, false);
                }
            }
            Piece::Alt { branches, optional, .. } => {
                let mut may_be_empty = *optional;
                for branch in branches {
                    let (bytes, empty) = first_bytes(branch);
                    set |= bytes;
                    may_be_empty |= empty;
                }
                if !may_be_empty {
                    return (set, false);
                }
            }
        }
    }
    (set, true)
}

/// Where a sequence goes on once its last piece matched: the rest of the sequence it is in (from
/// piece `k` of `seq`), closing the group opened at `close`'s offset first.
struct Then<'a> {
    seq: &'a [Piece],
    k: usize,
    close: Option<(usize, usize)>,
    up: Option<&'a Then<'a>>,
}

/// The line being matched and what its match may still spend.
struct Line<'h, 's> {
    hay: &'h [u8],
    slots: &'s mut [Option<(usize, usize)>],
    steps: usize,
}

impl Line<'_, '_> {
    /// Group `g` set to `span` while `next` is tried, and back to what it was if that fails.
    fn with_group<F>(&mut self, g: Option<usize>, span: (usize, usize), next: F) -> Result<Option<usize>, ()>
    where
        F: FnOnce(&mut Self) -> Result<Option<usize>, ()>,
    {
        let Some(g) = g else { return next(self) };
        let old = self.slots[g].replace(span);
        let found = next(self);
        if let Ok(None) = found {
            self.slots[g] = old;
        }
        found
    }
}

impl Template {
    /// The template of `pattern`, where it has one (else None: the regex reads it).
    pub fn of(pattern: &str) -> Option<Template> {
        Template::parsed(pattern, false)
    }

    /// The template of `pattern` compiled multi-line (`^` and `$` at every line's ends), for lines
    /// alone: a text holding a newline is the regex's.
    pub fn of_line(pattern: &str) -> Option<Template> {
        Template::parsed(pattern, true)
    }

    fn parsed(pattern: &str, multi_line: bool) -> Option<Template> {
        let hir = regex_syntax::ParserBuilder::new().multi_line(multi_line).build().parse(pattern).ok()?;
        let (start, end) = if multi_line { (Look::StartLF, Look::EndLF) } else { (Look::Start, Look::End) };
        let nodes: Vec<&Hir> = match hir.kind() {
            HirKind::Concat(nodes) => nodes.iter().collect(),
            _ => vec![&hir],
        };
        let mut t = Template { pieces: Vec::new(), first: None, start: false, end: false, groups: 1, line: multi_line,
                               lead: None };
        for (k, node) in nodes.iter().enumerate() {
            match node.kind() {
                HirKind::Look(look) if *look == start && k == 0 => t.start = true,
                HirKind::Look(look) if *look == end && k + 1 == nodes.len() => t.end = true,
                _ => pieces_of(node, &mut t.pieces)?,
            }
        }
        t.groups = groups_in(&t.pieces);
        t.lead = match t.pieces.first() {
            Some(Piece::Lit { bytes, .. }) => bytes.first().copied(),
            _ => None,
        };
        t.first = match first_bytes(&t.pieces) {
            (set, false) => Some(set),
            (_, true) => None,
        };
        Some(t)
    }

    /// Slots a match fills: one a group (group 0 the whole match).
    pub fn slots(&self) -> Vec<Option<(usize, usize)>> {
        vec![None; self.groups]
    }

    /// The leftmost match in `hay`, as the regex finds it, its groups into `slots` (those of no
    /// match: None).
    pub fn find(&self, hay: &[u8], slots: &mut [Option<(usize, usize)>]) -> Found {
        self.find_at(hay, 0, slots)
    }

    /// The leftmost match in `hay` from `from` on (as `captures_read_at`: `^` holds at 0 alone).
    pub fn find_at(&self, hay: &[u8], from: usize, slots: &mut [Option<(usize, usize)>]) -> Found {
        if hay.len() > MAX_LINE || !hay.is_ascii() || self.line && memchr::memchr(b'\n', hay).is_some() {
            return Found::GaveUp;
        }
        slots.iter_mut().for_each(|s| *s = None);
        let mut line = Line { hay, slots, steps: STEPS };
        if self.start {
            return match if from == 0 { self.at(&self.pieces, 0, 0, None, &mut line) } else { Ok(None) } {
                Ok(Some(end)) => Template::found(0, end, line.slots),
                Ok(None) => Found::NoMatch,
                Err(()) => Found::GaveUp,
            };
        }
        // the starts to try, leftmost first: where its first literal is, else where a byte a match
        // starts with is (a group of alternatives first: each place tried was each branch tried), else
        // everywhere
        let literal = match self.pieces.first() {
            Some(Piece::Lit { bytes, .. }) => bytes.as_slice(),
            _ => &[],
        };
        let mut from = from;
        while from <= hay.len() {
            let at = match (self.lead, self.first) {
                (Some(lead), _) => match memchr::memchr(lead, &hay[from..]) {
                    Some(i) if hay[from + i..].starts_with(literal) => from + i,
                    Some(i) => {
                        from += i + 1;
                        continue;
                    }
                    None => break,
                },
                (None, Some(set)) => match hay[from..].iter().position(|&b| set >> b & 1 == 1) {
                    Some(i) => from + i,
                    None => break,
                },
                (None, None) => from,
            };
            match self.at(&self.pieces, 0, at, None, &mut line) {
                Ok(Some(end)) => return Template::found(at, end, line.slots),
                Ok(None) => from = at + 1,
                Err(()) => return Found::GaveUp,
            }
        }
        Found::NoMatch
    }

    fn found(start: usize, end: usize, slots: &mut [Option<(usize, usize)>]) -> Found {
        slots[0] = Some((start, end));
        Found::Match(start, end)
    }

    /// Pieces `k..` of `seq` from `at`, then `then`: the match's end; Err when the steps ran out.
    /// (A group a path set is put back as it was where the path fails: an alternative or a run's
    /// length tried and left must not leave its groups behind.)
    fn at(&self, seq: &[Piece], k: usize, at: usize, then: Option<&Then<'_>>, line: &mut Line<'_, '_>)
          -> Result<Option<usize>, ()> {
        if line.steps == 0 {
            return Err(());
        }
        line.steps -= 1;
        let Some(p) = seq.get(k) else {
            return match then {
                None => Ok((!self.end || at == line.hay.len()).then_some(at)),
                Some(t) => {
                    let (g, open) = t.close.map_or((None, at), |(g, open)| (Some(g), open));
                    line.with_group(g, (open, at), |line| self.at(t.seq, t.k, at, t.up, line))
                }
            };
        };
        match p {
            Piece::Lit { bytes, group } => {
                if !line.hay[at..].starts_with(bytes) {
                    return Ok(None);
                }
                let end = at + bytes.len();
                line.with_group(*group, (at, end), |line| self.at(seq, k + 1, end, then, line))
            }
            Piece::Run { set, min, max, greedy, group } => {
                let room = (line.hay.len() - at).min(*max);
                let most = line.hay[at..at + room].iter().position(|&b| set >> b & 1 == 0).unwrap_or(room);
                if most < *min {
                    return Ok(None);
                }
                let try_len = |n: usize, line: &mut Line<'_, '_>| {
                    line.with_group(*group, (at, at + n), |line| self.at(seq, k + 1, at + n, then, line))
                };
                if *greedy {
                    for n in (*min..=most).rev() {
                        if let Some(end) = try_len(n, line)? {
                            return Ok(Some(end));
                        }
                    }
                } else {
                    for n in *min..=most {
                        if let Some(end) = try_len(n, line)? {
                            return Ok(Some(end));
                        }
                    }
                }
                Ok(None)
            }
            Piece::Alt { branches, optional, greedy, group } => {
                if *optional && !*greedy {
                    if let Some(end) = self.at(seq, k + 1, at, then, line)? {
                        return Ok(Some(end));
                    }
                }
                let after = Then { seq, k: k + 1, close: group.map(|g| (g, at)), up: then };
                for branch in branches {
                    if let Some(end) = self.at(branch, 0, at, Some(&after), line)? {
                        return Ok(Some(end));
                    }
                }
                if *optional && *greedy {
                    return self.at(seq, k + 1, at, then, line);
                }
                Ok(None)
            }
        }
    }
}

/// A declared regex and its template where it has one: the template reads what it can, the regex
/// the rest (the readers of fields, records and block pairs all search so).
#[derive(Debug)]
pub struct Templated {
    pub regex: regex::Regex,
    template: Option<Template>,
}

/// Where a search keeps a match's groups: its template's slots, or the regex's.
pub struct Groups {
    locs: regex::CaptureLocations,
    slots: Vec<Option<(usize, usize)>>,
    templated: bool,
}

impl Groups {
    /// Group `g` of the last match.
    pub fn get(&self, g: usize) -> Option<(usize, usize)> {
        if self.templated { self.slots.get(g).copied().flatten() } else { self.locs.get(g) }
    }
}

impl Templated {
    pub fn new(regex: regex::Regex) -> Self {
        let template = Template::of(regex.as_str());
        Templated { regex, template }
    }

    /// A multi-line regex's (`Template::of_line`: a line's body alone).
    pub fn of_line(regex: regex::Regex) -> Self {
        let template = Template::of_line(regex.as_str());
        Templated { regex, template }
    }

    /// The regex alone, without a template (what tests hold a template to).
    pub fn without_template(regex: regex::Regex) -> Self {
        Templated { regex, template: None }
    }

    pub fn has_template(&self) -> bool {
        self.template.is_some()
    }

    pub fn groups(&self) -> Groups {
        Groups { locs: self.regex.capture_locations(),
                 slots: self.template.as_ref().map_or_else(Vec::new, Template::slots), templated: false }
    }

    /// The leftmost match in `hay` from `from` on (as `captures_read_at`), its groups in `groups`.
    pub fn captures_at(&self, hay: &str, from: usize, groups: &mut Groups) -> Option<(usize, usize)> {
        if let Some(t) = &self.template {
            match t.find_at(hay.as_bytes(), from, &mut groups.slots) {
                Found::Match(a, z) => {
                    groups.templated = true;
                    return Some((a, z));
                }
                Found::NoMatch => return None,
                Found::GaveUp => {}
            }
        }
        groups.templated = false;
        self.regex.captures_read_at(&mut groups.locs, hay, from).map(|m| (m.start(), m.end()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Draws;

    // (made-up patterns, none a format's: the core holds no format's literal) and the literals
    // their lines are drawn around
    const PATTERNS: &[(&str, &[&str], &[&str])] = &[
        (r"Abc de: (\S+) fg (\S+) H", &["Abc de: ", " fg ", " H"], FILLERS),
        (r"Kw: (\d+); Lm: (\d+); No: (\S+);\s*Pq: (\S+)", &["Kw: ", "; Lm: ", "; No: ", ";", "Pq: "], &["1", "12", "0.5", "", " ", "x", ";"]),
        (r"u=(\d+), v=(\d+), w=\[([^\],]*)", &["u=", ", v=", ", w=[", "]"], FILLERS),
        (r"^ab (\w+) \.{2,}(\S*)$", &["ab ", " ", "..", "."], FILLERS),
        (r"x(\S+?)y(\d*)", &["x", "y"], FILLERS),
        (r"a: (\S{1,3})(\d+) b", &["a: ", " b"], FILLERS),
        (r"ab(c)d(\s*)e$", &["ab", "c", "d", "e"], FILLERS),
        (r"(?i)xy: (\S+)", &["xy: ", "XY: ", "xY: "], FILLERS),
        (r"z z(\S+)z", &["z z", "z"], FILLERS),
        (r"\d+(\S)b", &["1", "b"], FILLERS),
        (r"(?:a|b)c(\d{2})", &["a", "b", "c"], FILLERS),
        // groups of alternatives, optional groups, groups in groups
        (r"(ab)?c", &["a", "b", "c", "ab"], FILLERS),
        (r"(?:ab|cd)e(\d)?", &["ab", "cd", "e"], FILLERS),
        (r"((?:xy)?)z(\S*?)", &["x", "y", "z"], FILLERS),
        (r"(a|ab)(c|bcd)(d*)", &["a", "b", "c", "d", "ab", "bcd"], FILLERS),
        (r"(?:a|ab)??(b)(?:c|)(x|)", &["a", "b", "c", "x", "ab"], FILLERS),
        (r"y(z(\d+)?|(w)|)\.", &["y", "z", "w", "."], FILLERS),
        (r"x(?:yz)??(\w*)", &["x", "yz", "y", "z"], FILLERS),
        (r"^\s*(?:(\w+)=(\d+)|(-{2,})) *(?:;|,)", &[" ", "a", "=", "-", "--", ";"], FILLERS),
    ];

    const FILLERS: &[&str] = &["", " ", "  ", "1", "12", "0.5", ";", ",", "]", ".", "...", "x", "y", "z", "_w", "-",
                               "\t", "a", "b", "c", "7", "34", "5", "9.25", "", ""];

    fn line(d: &mut Draws, literals: &[&str], fillers: &[&str]) -> String {
        let mut out = String::new();
        for _ in 0..d.below(3) {
            out.push_str(fillers[d.below(fillers.len())]);
        }
        for lit in literals {
            if d.below(6) > 0 {
                out.push_str(lit);
            }
            for _ in 0..d.below(3) {
                out.push_str(fillers[d.below(fillers.len())]);
            }
        }
        if d.below(20) == 0 {
            out.insert(d.below(out.len() + 1), 'é'); // (not ASCII: the regex's)
        }
        out
    }

    /// A pattern's template and regex, and where each keeps a line's groups.
    struct Pair {
        t: Template,
        re: regex::Regex,
        locs: regex::CaptureLocations,
        slots: Vec<Option<(usize, usize)>>,
    }

    impl Pair {
        fn of(pattern: &str) -> Pair {
            let t = Template::of(pattern).unwrap_or_else(|| panic!("{pattern}: no template"));
            let re = regex::Regex::new(pattern).unwrap();
            let (locs, slots) = (re.capture_locations(), t.slots());
            Pair { t, re, locs, slots }
        }

        /// What the template makes of `s`, held to the regex: the same match and every group, or a
        /// line that is not ASCII given up.
        fn same_as_the_regex(&mut self, s: &str) -> Found {
            let Pair { t, re, locs, slots } = self;
            let want = re.captures_read(locs, s).map(|m| (m.start(), m.end()));
            let found = t.find(s.as_bytes(), slots);
            match found {
                Found::GaveUp => assert!(!s.is_ascii(), "{}: gave up on {s:?}", re.as_str()),
                Found::NoMatch => assert_eq!(want, None, "{}: {s:?}", re.as_str()),
                Found::Match(a, z) => {
                    assert_eq!(want, Some((a, z)), "{}: {s:?}", re.as_str());
                    for g in 0..locs.len() {
                        assert_eq!(slots.get(g).copied().flatten(), locs.get(g), "{}: group {g} of {s:?}", re.as_str());
                    }
                }
            }
            found
        }
    }

    #[test]
    fn templates_find_what_the_regex_finds() {
        let mut d = Draws::new(11);
        for (pattern, literals, fillers) in PATTERNS {
            let mut pair = Pair::of(pattern);
            let (mut matched, mut gave_up) = (0, 0);
            for _ in 0..100_000 {
                let s = line(&mut d, literals, fillers);
                match pair.same_as_the_regex(&s) {
                    Found::GaveUp => gave_up += 1,
                    Found::NoMatch => {}
                    Found::Match(..) => matched += 1,
                }
            }
            assert!(matched > 50 && gave_up > 100, "{pattern}: {matched} lines matched, {gave_up} not ASCII");
        }
    }

    /// Step lines of a hand-written loop's shape (made-up keys), whole and with a few edits each.
    #[test]
    fn anchored_step_lines_with_optional_parts_read_as_the_regex_reads_them() {
        const PATTERNS: &[(&str, &[&str])] = &[
            (r"^k:(\d{1,6}) q:([-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|na|in|-?na))(?: w:([-+.\de]{1,9}))?(?: z:([-+.\de]{1,9}|na|in))?[ \t]*$",
             &["k:12 q:3.5 w:0.0001 z:1.5", "k:1 q:na", "k:7 q:-na z:in", "k:30 q:2.5e-3 w:1e-5 \t", "k:4 q:1e5 z:0.5  "]),
            (r"^u:(\d{1,5})/(\d{1,5}) (?:v:(?P<v>[-+]?(?:\d[\d.]*|na|in)) )?t:(\d{1,9})ms a:",
             &["u:3/100 v:2.75 t:1234ms a:5.1ms", "u:10/10 t:99ms a:nanms", "u:1/2 v:na t:0ms a:", "u:5/6 v:-1. t:7ms a:x"]),
        ];
        const EDITS: &[&str] = &["", " ", "0", "1", "12", "3.5", "e", "-", "+", ".", "na", "in", "x", "\t", "/", "ms", ":", "é"];
        let mut d = Draws::new(5);
        for (pattern, lines) in PATTERNS {
            let mut pair = Pair::of(pattern);
            let (mut matched, mut missed) = (0, 0);
            for _ in 0..100_000 {
                let mut s = lines[d.below(lines.len())].to_string();
                for _ in 0..d.below(3) {
                    let at = d.below(s.len() + 1);
                    if !s.is_char_boundary(at) {
                        continue;
                    }
                    match d.below(3) {
                        0 => s.insert_str(at, EDITS[d.below(EDITS.len())]),
                        1 if at < s.len() && s.is_char_boundary(at + 1) => { s.remove(at); }
                        _ => s.truncate(at),
                    }
                }
                match pair.same_as_the_regex(&s) {
                    Found::GaveUp => {}
                    Found::NoMatch => missed += 1,
                    Found::Match(..) => matched += 1,
                }
            }
            assert!(matched > 20_000 && missed > 5_000, "{pattern}: {matched} lines matched, {missed} not");
        }
    }

    #[test]
    fn a_multi_line_pattern_reads_one_line() {
        let pattern = r"^\s*(\w+) \.{2,} ?(.*?)\s*$";
        let t = Template::of_line(pattern).unwrap();
        let re = regex::RegexBuilder::new(pattern).multi_line(true).build().unwrap();
        let mut locs = re.capture_locations();
        let mut d = Draws::new(3);
        let mut matched = 0;
        for _ in 0..20_000 {
            let s = line(&mut d, &["  ", "ab", " ", "....", " ", "x y", "  "], FILLERS);
            let mut slots = t.slots();
            match t.find(s.as_bytes(), &mut slots) {
                Found::GaveUp => assert!(!s.is_ascii()),
                found => {
                    let want = re.captures_read(&mut locs, &s).map(|m| (m.start(), m.end()));
                    assert_eq!(found == Found::NoMatch, want.is_none(), "{s:?}");
                    matched += usize::from(want.is_some());
                    if want.is_some() {
                        for (g, slot) in slots.iter().enumerate() {
                            assert_eq!(*slot, locs.get(g), "group {g} of {s:?}");
                        }
                    }
                }
            }
        }
        assert_eq!(t.find(b"ab .. c\nab .. d", &mut t.slots()), Found::GaveUp); // (two lines: the regex's)
        assert!(matched > 1000, "{matched} lines matched");
        // (a pattern's own single-line anchors in a multi-line one: the regex's)
        assert!(Template::of(pattern).is_some_and(|t| !t.line) && Template::of_line(r"(?-m)^a$").is_none());
    }

    #[test]
    fn what_cannot_backtrack_in_order_has_no_template() {
        for pattern in [r"a(?:bc)*", r"a\bc", r"(?m)^a$", r"(a|b)+", r"(?:ab){2}", r"(?:a|b$)c", r"(\d)+", r"x(?:y(?:z)?)*", r"a(?:;|$)"] {
            assert!(Template::of(pattern).is_none(), "{pattern}");
        }
        for pattern in [r"(?:ab|cd)e", r"(ab)?c", r"(a\d)c", r"((a)|b(c)?)d"] {
            assert!(Template::of(pattern).is_some(), "{pattern}");
        }
    }

    #[test]
    fn past_ascii_or_past_its_steps_the_regex_reads() {
        let t = Template::of(r"x(\S+?)y").unwrap();
        assert_eq!(t.find("xéy".as_bytes(), &mut t.slots()), Found::GaveUp);
        let t = Template::of(r"a(\S*)(\S*)(\S*)(\S*)b").unwrap();
        assert_eq!(t.find(format!("a{}", "c".repeat(200)).as_bytes(), &mut t.slots()), Found::GaveUp);
        // a long line, whatever it holds (a run's reach is read at each step)
        let t = Template::of(r"x(\S+?)y").unwrap();
        assert_eq!(t.find(format!("x{}y", "c".repeat(MAX_LINE)).as_bytes(), &mut t.slots()), Found::GaveUp);
        assert!(matches!(t.find(format!("x{}y", "c".repeat(MAX_LINE - 3)).as_bytes(), &mut t.slots()),
                         Found::Match(0, _)));
        // every start tried counts (a pattern that opens with a run tries each)
        let t = Template::of(r"\d*(\d)z").unwrap();
        let started = std::time::Instant::now();
        assert_eq!(t.find("1".repeat(MAX_LINE).as_bytes(), &mut t.slots()), Found::GaveUp);
        assert!(started.elapsed() < std::time::Duration::from_millis(200), "{:?}", started.elapsed());
    }
}
