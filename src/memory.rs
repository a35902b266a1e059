//! The allocator's settings for the whole process, set once before anything runs.

/// Blocks of 256 KiB and more (a batch's request lines and its output file, a 200,000-job
/// run's score vectors) are mapped each on its own and unmapped when freed. glibc otherwise
/// raises this threshold after the first such free, so later large blocks land in the heap
/// among small ones that outlive them and pin their pages: a 200,000-job run by batch peaked
/// at 262 MB where it now takes 179, a streamed one at 138 where it takes 118, and `view`
/// held twice what it needs after a compare (docs/dev/performance.md, figures d, k and p).
pub fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets one of the allocator's parameters; any value is valid for it.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}
