//! Subnormal floats flushed to zero while a session runs.
//!
//! A product or sum that yields a subnormal float (below 1.2e-38) takes
//! x86 processors tens to hundreds of cycles in microcode. Models meet
//! them in squeeze-and-excitation gates (a sigmoid of a very negative
//! input) and in weights decayed towards zero: on `tf_efficientnetv2_s` a
//! 1×1 convolution over such a gate ran 30× slower than over normal
//! values. [`flushing`] runs a computation with the MXCSR register's
//! flush-to-zero and denormals-are-zero bits set on the calling thread
//! (restored after), as TensorFlow and PyTorch's `set_flush_denormal` do;
//! [`super::hot_pool`] sets them on the pool's threads for the run. What
//! changes is only values below 1.2e-38, read and written as zero.

/// FTZ (bit 15) and DAZ (bit 6) of MXCSR.
#[cfg(target_arch = "x86_64")]
const FLUSH: u32 = (1 << 15) | (1 << 6);

/// Runs `f` with subnormal floats flushed to zero on this thread.
pub fn flushing<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[allow(deprecated)]
        // SAFETY: reading and writing MXCSR's rounding-independent FTZ/DAZ
        // bits; the previous value is restored before returning.
        unsafe {
            let before = std::arch::x86_64::_mm_getcsr();
            std::arch::x86_64::_mm_setcsr(before | FLUSH);
            let r = f();
            std::arch::x86_64::_mm_setcsr(before);
            r
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnormal_products_become_zero_only_inside() {
        let tiny = std::hint::black_box(1e-30f32);
        let small = std::hint::black_box(1e-10f32);
        assert!(tiny * small > 0.0, "a subnormal result outside");
        let inside = flushing(|| std::hint::black_box(tiny) * std::hint::black_box(small));
        if cfg!(target_arch = "x86_64") {
            assert_eq!(inside, 0.0);
        }
        assert!(tiny * small > 0.0, "the register is restored");
    }
}
