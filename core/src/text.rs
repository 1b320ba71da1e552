//! Offsets: Python slices a block by characters, the core reads its UTF-8 bytes.

/// Moves forward through a text, turning byte offsets into character offsets and back;
/// every call must ask for an offset no earlier than the one before (one pass a block).
pub struct Cursor<'a> {
    bytes: &'a [u8],
    ascii: bool,
    byte: usize,
    chr: usize,
}

fn is_lead(b: u8) -> bool {
    (b & 0xC0) != 0x80
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor { bytes: text.as_bytes(), ascii: text.is_ascii(), byte: 0, chr: 0 }
    }

    /// The byte offset of character offset `target`.
    pub fn byte_of(&mut self, target: usize) -> usize {
        if self.ascii {
            return target.min(self.bytes.len());
        }
        if target < self.chr {
            self.byte = 0;
            self.chr = 0;
        }
        while self.chr < target && self.byte < self.bytes.len() {
            self.byte += 1;
            while self.byte < self.bytes.len() && !is_lead(self.bytes[self.byte]) {
                self.byte += 1;
            }
            self.chr += 1;
        }
        self.byte
    }

    /// The character offset of byte offset `target` (the start of a character).
    pub fn char_of(&mut self, target: usize) -> usize {
        if self.ascii {
            return target;
        }
        if target < self.byte {
            self.byte = 0;
            self.chr = 0;
        }
        self.chr += self.bytes[self.byte..target].iter().filter(|&&b| is_lead(b)).count();
        self.byte = target;
        self.chr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
