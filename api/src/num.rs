//! Conversions of user-influenced numbers that cannot panic or wrap: each says what happens at
//! the edges. The workspace denies unchecked `as` casts that may truncate or change sign
//! (`clippy::cast_possible_truncation`, `cast_sign_loss`, `cast_possible_wrap`); code converts
//! through these instead, so the edge behaviour is written down once.

/// `x` rounded toward zero as an `i64` (Go's `int64(x)` for values in range), saturating at
/// `i64::MIN`/`i64::MAX`; NaN is 0.
pub fn f64_to_i64_saturating(x: f64) -> i64 {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "Rust's float-to-int `as` saturates and maps NaN to 0, which is what this function promises"
    )]
    let v = x as i64;
    v
}

/// `x` rounded toward zero as a `u64`, saturating at `0`/`u64::MAX`; NaN is 0.
pub fn f64_to_u64_saturating(x: f64) -> u64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "Rust's float-to-int `as` saturates (negative to 0) and maps NaN to 0, which is what this function promises"
    )]
    let v = x as u64;
    v
}

/// `x` rounded toward zero as a `u32`, saturating at `0`/`u32::MAX`; NaN is 0.
pub fn f64_to_u32_saturating(x: f64) -> u32 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "Rust's float-to-int `as` saturates (negative to 0) and maps NaN to 0, which is what this function promises"
    )]
    let v = x as u32;
    v
}

/// `x` rounded toward zero as an `i32`, saturating at `i32::MIN`/`i32::MAX`; NaN is 0.
pub fn f64_to_i32_saturating(x: f64) -> i32 {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "Rust's float-to-int `as` saturates and maps NaN to 0, which is what this function promises"
    )]
    let v = x as i32;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_truncate_toward_zero_and_saturate() {
        // (input, i64, u64, u32, i32)
        let rows = [
            (2.9, 2, 2, 2, 2),
            (-2.9, -2, 0, 0, -2),
            (1e300, i64::MAX, u64::MAX, u32::MAX, i32::MAX),
            (-1e300, i64::MIN, 0, 0, i32::MIN),
            (f64::INFINITY, i64::MAX, u64::MAX, u32::MAX, i32::MAX),
            (f64::NAN, 0, 0, 0, 0),
        ];
        for (x, i, u, u32_, i32_) in rows {
            assert_eq!(f64_to_i64_saturating(x), i, "{x}");
            assert_eq!(f64_to_u64_saturating(x), u, "{x}");
            assert_eq!(f64_to_u32_saturating(x), u32_, "{x}");
            assert_eq!(f64_to_i32_saturating(x), i32_, "{x}");
        }
    }
}
