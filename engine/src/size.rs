//! Sizes as people write them: `4096`, `64KiB`, `1GiB`, `2GB`.

/// Parses a byte size: a number with an optional unit (`B`, `KB`, `MB`,
/// `GB`, `TB` in powers of 1000; `KiB`, `MiB`, `GiB`, `TiB` in powers of
/// 1024; `K`, `M`, `G` as the binary units).
///
/// ```
/// assert_eq!(corelog::cli::parse_size("2GB"), Ok(2_000_000_000));
/// assert_eq!(corelog::cli::parse_size("512MiB"), Ok(512 << 20));
/// assert_eq!(corelog::cli::parse_size("4096"), Ok(4096));
/// assert!(corelog::cli::parse_size("12 parsecs").is_err());
/// ```
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "invalid size {s:?}: unknown unit {unit:?} (use B, KB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    let value: f64 = num.parse().map_err(|_| {
        format!("invalid size {s:?}: expected a number with an optional unit, like 512MiB")
    })?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("invalid size {s:?}"));
    }
    let bytes = value * mult as f64;
    if bytes > u64::MAX as f64 {
        return Err(format!("invalid size {s:?}: too large"));
    }
    Ok(bytes.round() as u64)
}
