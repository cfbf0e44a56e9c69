//! Heap buffers aligned for direct I/O.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::IO_ALIGN;

/// A zero-initialised byte buffer aligned to `IO_ALIGN`, allocated once and reused.
pub struct AlignedBuf {
    pointer: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads of the owned bytes.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes; `len` is rounded up to a multiple of `IO_ALIGN`.
    pub fn new(len: usize) -> AlignedBuf {
        let len = len.max(1).div_ceil(IO_ALIGN) * IO_ALIGN;
        let layout = Layout::from_size_align(len, IO_ALIGN).expect("valid layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let pointer = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { pointer, len }
    }

    /// Length in bytes: a multiple of `IO_ALIGN`, at least `IO_ALIGN`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: `new` allocates at least `IO_ALIGN` bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: pointer is valid for len initialised bytes for the lifetime of self.
        unsafe { std::slice::from_raw_parts(self.pointer.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: pointer is valid for len bytes and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, IO_ALIGN).expect("valid layout");
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { dealloc(self.pointer.as_ptr(), layout) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        let mut copy = AlignedBuf::new(self.len);
        copy.copy_from_slice(self);
        copy
    }
}
