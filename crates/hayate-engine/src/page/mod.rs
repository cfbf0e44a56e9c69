//! The common page header and its checksum.
//!
//! Every page starts with a 32-byte header (little-endian):
//!
//! | offset | size | field                                                   |
//! |--------|------|---------------------------------------------------------|
//! | 0      | 4    | CRC-32C of bytes 4..page_size                           |
//! | 4      | 1    | page kind (`PageKind`)                                  |
//! | 5      | 1    | page format version (`PAGE_FORMAT_VERSION`)             |
//! | 6      | 2    | reserved, zero                                          |
//! | 8      | 8    | page id                                                 |
//! | 16     | 8    | page LSN: the log position of the last change applied   |
//! | 24     | 8    | write sequence: increases on every write of the page    |
//!
//! The body (bytes 32..page_size) belongs to the page kind.
//!
//! Lifecycle: a page is built in a buffer frame, `seal`ed just before it is written (checksum
//! computed last), and `verify`d right after it is read, before anything else looks at it.

use crate::error::{Error, Location, Result};

pub const PAGE_HEADER_SIZE: usize = 32;
pub const PAGE_FORMAT_VERSION: u8 = 1;
/// Page size of a new store unless configured otherwise, in bytes.
pub const PAGE_SIZE_DEFAULT: usize = 4096;
pub const PAGE_SIZE_MIN: usize = 4096;
pub const PAGE_SIZE_MAX: usize = 65536;

pub type PageId = u64;

/// Page id 0 is never a real page; it stands for "no page" in links.
pub const PAGE_ID_NONE: PageId = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    Free = 0,
    BtreeLeaf = 1,
    BtreeInner = 2,
    Overflow = 3,
    Meta = 4,
}

impl PageKind {
    pub fn from_u8(value: u8) -> Option<PageKind> {
        Some(match value {
            0 => PageKind::Free,
            1 => PageKind::BtreeLeaf,
            2 => PageKind::BtreeInner,
            3 => PageKind::Overflow,
            4 => PageKind::Meta,
            _ => return None,
        })
    }
}

/// Checks that a page size is a multiple of 4 KiB from `PAGE_SIZE_MIN` to `PAGE_SIZE_MAX`
/// (24 KiB, the table page size of the classic experiments, is one).
pub fn validate_page_size(page_size: usize) -> Result<()> {
    let ok = (PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(&page_size)
        && page_size.is_multiple_of(crate::io::IO_ALIGN);
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "page size {page_size} must be a multiple of 4096 between {PAGE_SIZE_MIN} and \
             {PAGE_SIZE_MAX}"
        )))
    }
}

fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

/// Read access to the header of a page image.
pub struct PageHeaderAccessor<'a> {
    bytes: &'a [u8],
}

impl<'a> PageHeaderAccessor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        debug_assert!(bytes.len() >= PAGE_HEADER_SIZE);
        PageHeaderAccessor { bytes }
    }
    pub fn checksum(&self) -> u32 {
        u32::from_le_bytes(self.bytes[0..4].try_into().expect("4 bytes"))
    }
    pub fn kind_raw(&self) -> u8 {
        self.bytes[4]
    }
    pub fn kind(&self) -> Option<PageKind> {
        PageKind::from_u8(self.bytes[4])
    }
    pub fn version(&self) -> u8 {
        self.bytes[5]
    }
    pub fn page_id(&self) -> PageId {
        read_u64(self.bytes, 8)
    }
    pub fn lsn(&self) -> u64 {
        read_u64(self.bytes, 16)
    }
    pub fn write_sequence(&self) -> u64 {
        read_u64(self.bytes, 24)
    }
}

/// Write access to the header of a page image.
pub struct PageHeaderBuilder<'a> {
    bytes: &'a mut [u8],
}

impl<'a> PageHeaderBuilder<'a> {
    pub fn new(bytes: &'a mut [u8]) -> Self {
        debug_assert!(bytes.len() >= PAGE_HEADER_SIZE);
        PageHeaderBuilder { bytes }
    }
    /// Zeroes the whole page and writes a fresh header.
    pub fn init(&mut self, kind: PageKind, page_id: PageId) {
        self.bytes.fill(0);
        self.bytes[4] = kind as u8;
        self.bytes[5] = PAGE_FORMAT_VERSION;
        self.bytes[8..16].copy_from_slice(&page_id.to_le_bytes());
    }
    pub fn set_kind(&mut self, kind: PageKind) {
        self.bytes[4] = kind as u8;
    }
    pub fn set_lsn(&mut self, lsn: u64) {
        self.bytes[16..24].copy_from_slice(&lsn.to_le_bytes());
    }
    pub fn set_write_sequence(&mut self, sequence: u64) {
        self.bytes[24..32].copy_from_slice(&sequence.to_le_bytes());
    }
}

/// Asks the CPU to start loading the cache line holding `pointer` (a hint: it never faults, so
/// any address is fine, and it reads nothing the program can observe).
#[inline]
pub fn prefetch(pointer: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no observable effect besides timing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(pointer as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = pointer;
}

/// Computes the checksum of a page image (everything after the checksum field).
pub fn page_checksum(bytes: &[u8]) -> u32 {
    crc32c::crc32c(&bytes[4..])
}

/// Stores the checksum; the last step before a page is written.
pub fn seal(bytes: &mut [u8]) {
    let checksum = page_checksum(bytes);
    bytes[0..4].copy_from_slice(&checksum.to_le_bytes());
}

/// Verifies a page image right after it was read: checksum, known kind and version, and the
/// expected page id. `file` and `offset` only serve to name the place in the error.
pub fn verify(bytes: &[u8], expected_page_id: PageId, file: &str, offset: u64) -> Result<()> {
    let header = PageHeaderAccessor::new(bytes);
    let location = || Location {
        file: file.to_string(),
        page_id: Some(expected_page_id),
        offset: Some(offset),
        lsn: Some(header.lsn()),
    };
    let computed = page_checksum(bytes);
    if computed != header.checksum() {
        return Err(Error::corruption(
            location(),
            format!(
                "checksum mismatch: stored {:#010x}, computed {computed:#010x}",
                header.checksum()
            ),
        ));
    }
    if header.kind().is_none() || header.version() != PAGE_FORMAT_VERSION {
        return Err(Error::corruption(
            location(),
            format!(
                "unknown page kind {} or version {}",
                header.kind_raw(),
                header.version()
            ),
        ));
    }
    if header.page_id() != expected_page_id {
        return Err(Error::corruption(
            location(),
            format!(
                "page holds id {} instead of {expected_page_id}",
                header.page_id()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_verify_round_trips_and_detects_flips() {
        let mut page = vec![0u8; 4096];
        PageHeaderBuilder::new(&mut page).init(PageKind::BtreeLeaf, 7);
        PageHeaderBuilder::new(&mut page).set_lsn(99);
        page[100] = 42;
        seal(&mut page);
        verify(&page, 7, "data", 0).expect("valid page");
        assert!(
            verify(&page, 8, "data", 0).is_err(),
            "wrong page id must be detected"
        );
        page[2000] ^= 1;
        let error = verify(&page, 7, "data", 28672).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("page 7") && text.contains("lsn 99"), "{text}");
    }

    #[test]
    fn page_sizes() {
        assert!(validate_page_size(4096).is_ok());
        assert!(validate_page_size(16384).is_ok());
        assert!(validate_page_size(24576).is_ok());
        assert!(validate_page_size(5000).is_err());
        assert!(validate_page_size(2048).is_err());
    }
}
