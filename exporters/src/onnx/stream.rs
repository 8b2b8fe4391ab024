//! Encoding a protobuf message straight into a file.
//!
//! [`StreamBuf`] is a [`BufMut`] over a writer: small fields gather in a
//! 1 MiB buffer, long byte fields (tensor `raw_data`) go to the writer as
//! they are. Encoding a model with hundreds of megabytes of weights so
//! needs no buffer of the model's size, and its bytes are copied once, into
//! the file, instead of three times (message buffer, its fresh pages, file).

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut};
use std::io::Write;

/// Bytes gathered before a write.
const GATHER: usize = 1 << 20;

/// Slices at least this long skip the gathering buffer.
const DIRECT: usize = 64 << 10;

/// A [`BufMut`] that writes to `out`. A write error is kept, later writes
/// are skipped, and [`StreamBuf::finish`] returns it.
pub(crate) struct StreamBuf<W: Write> {
    out: W,
    gathered: Vec<u8>,
    written: u64,
    error: Option<std::io::Error>,
}

impl<W: Write> StreamBuf<W> {
    pub(crate) fn new(out: W) -> StreamBuf<W> {
        StreamBuf { out, gathered: Vec::with_capacity(GATHER), written: 0, error: None }
    }

    /// Writes what is gathered; returns the bytes written in all, or the
    /// first write error.
    pub(crate) fn finish(mut self) -> std::io::Result<u64> {
        self.flush_gathered();
        match self.error.take() {
            Some(e) => Err(e),
            None => self.out.flush().map(|()| self.written),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.error.is_none() {
            match self.out.write_all(bytes) {
                Ok(()) => self.written += bytes.len() as u64,
                Err(e) => self.error = Some(e),
            }
        }
    }

    fn flush_gathered(&mut self) {
        let gathered = std::mem::take(&mut self.gathered);
        self.write(&gathered);
        self.gathered = gathered;
        self.gathered.clear();
    }
}

// SAFETY: `chunk_mut` hands out only the gathering buffer's spare capacity,
// and `advance_mut` extends its length over bytes the caller has written
// there (the trait's contract), never past its capacity.
unsafe impl<W: Write> BufMut for StreamBuf<W> {
    fn remaining_mut(&self) -> usize {
        usize::MAX / 2
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        let len = self.gathered.len() + cnt;
        assert!(len <= self.gathered.capacity(), "advanced past the chunk handed out");
        // SAFETY: the caller initialized `cnt` bytes of the spare capacity.
        unsafe { self.gathered.set_len(len) };
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        if self.gathered.len() == self.gathered.capacity() {
            self.flush_gathered();
        }
        UninitSlice::uninit(self.gathered.spare_capacity_mut())
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= DIRECT {
            self.flush_gathered();
            self.write(src);
        } else {
            if self.gathered.capacity() - self.gathered.len() < src.len() {
                self.flush_gathered();
            }
            self.gathered.extend_from_slice(src);
        }
    }

    fn put<T: Buf>(&mut self, mut src: T)
    where
        Self: Sized,
    {
        while src.has_remaining() {
            let n = {
                let chunk = src.chunk();
                self.put_slice(chunk);
                chunk.len()
            };
            src.advance(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_bytes_are_the_bytes_put_in_order() {
        let long = vec![7u8; DIRECT * 3 + 5];
        let mut expected = b"head".to_vec();
        expected.extend(&long);
        expected.extend((0..GATHER + 10).map(|i| i as u8));
        expected.extend(b"tail");

        let mut out = Vec::new();
        let mut stream = StreamBuf::new(&mut out);
        stream.put_slice(b"head");
        stream.put(bytes::Bytes::from(long));
        for i in 0..GATHER + 10 {
            stream.put_u8(i as u8);
        }
        stream.put_slice(b"tail");
        assert_eq!(stream.finish().unwrap(), expected.len() as u64);
        assert_eq!(out, expected);
    }

    #[test]
    fn a_write_error_is_returned_by_finish() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut stream = StreamBuf::new(Full);
        stream.put_slice(&[1; DIRECT]);
        stream.put_u8(1);
        assert_eq!(stream.finish().unwrap_err().to_string(), "disk full");
    }
}
