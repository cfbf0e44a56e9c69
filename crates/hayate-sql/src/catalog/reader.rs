//! The one reader of the catalog's rows (`sql.catalog` definitions, `sql.sequence` rows):
//! bounded little-endian reads over bytes that came from disk and are not trusted.
//!
//! 1. A decoder makes a `Reader` over a row's bytes.
//! 2. Each read checks the bytes are there and returns None past the end (or for a string
//!    that is not UTF-8, or a column index out of range); the decoder turns None into a
//!    `DATA_CORRUPTED` error naming the field.
//! 3. The decoder ends with `at_end`: trailing bytes are corruption too.

pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, offset: 0 }
    }

    /// True when every byte was read.
    pub(super) fn at_end(&self) -> bool {
        self.offset == self.bytes.len()
    }

    fn take(&mut self, length: usize) -> Option<&'a [u8]> {
        let end = self.offset.checked_add(length)?;
        let slice = self.bytes.get(self.offset..end)?;
        self.offset = end;
        Some(slice)
    }

    pub(super) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub(super) fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    pub(super) fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A u32 length, then that many bytes.
    pub(super) fn bytes(&mut self) -> Option<&'a [u8]> {
        let length = self.u32()? as usize;
        self.take(length)
    }

    /// A u32 length, then that many bytes of UTF-8.
    pub(super) fn string(&mut self) -> Option<String> {
        let length = self.u32()? as usize;
        String::from_utf8(self.take(length)?.to_vec()).ok()
    }

    /// A u16 count of column indexes below `limit`.
    /// An index's key columns: as `columns`, with u16::MAX (an expression key) as None.
    pub(super) fn index_columns(&mut self, limit: usize) -> Option<Vec<Option<usize>>> {
        let count = self.u16()?;
        (0..count)
            .map(|_| match self.u16()? {
                u16::MAX => Some(None),
                column => (usize::from(column) < limit).then_some(Some(usize::from(column))),
            })
            .collect()
    }

    pub(super) fn columns(&mut self, limit: usize) -> Option<Vec<usize>> {
        let count = self.u16()?;
        (0..count)
            .map(|_| self.u16().map(usize::from).filter(|c| *c < limit))
            .collect()
    }
}
