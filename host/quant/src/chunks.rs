//! Fixed-size views of slices, without panicking paths.

/// The whole `N`-element chunks of `s` as array references (a trailing partial chunk is
/// skipped; callers check lengths beforehand).
pub(crate) fn arrays<T, const N: usize>(s: &[T]) -> impl Iterator<Item = &[T; N]> {
    s.chunks_exact(N).filter_map(|c| c.first_chunk::<N>())
}

/// Mutable counterpart of [`arrays`].
pub(crate) fn arrays_mut<T, const N: usize>(s: &mut [T]) -> impl Iterator<Item = &mut [T; N]> {
    s.chunks_exact_mut(N)
        .filter_map(|c| c.first_chunk_mut::<N>())
}
